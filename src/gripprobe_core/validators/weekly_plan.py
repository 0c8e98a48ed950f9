"""``weekly_plan_task``: a task was added to the right week of a seeded markdown plan, nothing else."""

from __future__ import annotations

import re
from typing import Any

from .context import ValidatorContext
from ..models.results import ValidatorResult
from ..runvalues import render
from . import (
    Options, WorkspacePath, clip, find_source, invalid_options, parse_options, read_workspace_file, render_path,
    variables, with_options,
)

__all__ = ["weekly_plan_task", "plan_sections"]

_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_OPEN_TASK = re.compile(r"^\s*[-*+]\s+\[ \]\s+(.*?)\s*$")


class WeeklyPlanTaskOptions(Options):
    path: WorkspacePath
    task: str
    """The task text (rendered); it must appear as ``- [ ] <task>``."""
    heading_var: str = "next_week_heading"
    """Template variable holding the heading text of the section the task belongs in."""


def plan_sections(text: str) -> list[tuple[str | None, str]]:
    """Every line of a markdown plan with the heading text it sits under (None before any heading)."""
    heading: str | None = None
    out: list[tuple[str | None, str]] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        m = _HEADING.match(line)
        if m:
            heading = m.group(1)
        out.append((heading, line))
    return out


def _is_task(line: str, task: str) -> bool:
    m = _OPEN_TASK.match(line)
    return bool(m) and m.group(1) == task


def _content_lines(text: str, task: str) -> list[str]:
    """Non-blank lines, right-stripped, without the task's checkbox lines."""
    return [line.rstrip() for _, line in plan_sections(text) if line.strip() and not _is_task(line, task)]


@with_options(WeeklyPlanTaskOptions)
def weekly_plan_task(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """Exactly one ``- [ ] <task>`` line, under the target week's heading; the seeded plan otherwise intact.

    "Intact" compares the non-blank lines with the test's fixture of the same path (rendered the way
    it was seeded): blank lines may change, nothing else may.
    """
    kind = "weekly_plan_task"
    opts = parse_options(WeeklyPlanTaskOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    values = variables(ctx)
    heading = values.get(opts.heading_var)
    if not heading:
        return invalid_options(kind, f"no variable {opts.heading_var!r} in the run context")
    path, bad_path = render_path(kind, opts.path, values)
    if bad_path:
        return bad_path
    task = render(opts.task, values).strip()
    shown_expected = f"- [ ] {task}  (under '{heading}' only; the rest of the plan unchanged)"
    read = read_workspace_file(ctx, path)
    if read.text is None:
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=read.observed,
                               message=f"{path}: {read.problem}")
    placed = [h for h, line in plan_sections(read.text) if _is_task(line, task)]
    problems = []
    right = sum(1 for h in placed if h == heading)
    wrong = sorted({h or "(before any heading)" for h in placed if h != heading})
    if right == 0:
        problems.append(f"no '- [ ] {task}' line under '{heading}'")
    elif right > 1:
        problems.append(f"the task appears {right} times under '{heading}'")
    if wrong:
        problems.append("the task is also under " + ", ".join(repr(w) for w in wrong))
    seed = next((f for f in ctx.test.fixtures if f.path == path), None)
    if seed is not None:
        before = _content_lines(render(seed.content, values), task)
        after = _content_lines(read.text, task)
        if before != after:
            removed = [line for line in before if line not in after]
            added = [line for line in after if line not in before]
            detail = []
            if removed:
                detail.append(f"removed or changed: {removed[:3]!r}")
            if added:
                detail.append(f"added: {added[:3]!r}")
            problems.append("the rest of the plan changed" + (f" ({'; '.join(detail)})" if detail else " (order)"))
    passed = not problems
    message = f"task added under '{heading}'" if passed else f"{path}: " + "; ".join(problems)
    return ValidatorResult(kind=kind, passed=passed, expected=shown_expected, observed=clip(read.text),
                           message=clip(message, 1000), source=find_source(ctx.events, path))
