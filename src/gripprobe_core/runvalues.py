"""Values fixed at run time, and the ``${name}`` templating that puts them into a test.

A run computes its :func:`make_run_values` once, records it in every ``case.json`` and hands it to
each phase, so a later ``rebuild-reports --recompute`` reaches the same verdict as the run did (a
test judged against "today" keeps judging against the day it ran).

Templating (:func:`render`) fills ``${name}`` placeholders only. Unknown names are left as they are,
and so is every other use of ``$`` (``$HOME``, ``$(pwd)``, ``$$``), so shell commands and scripts in
fixtures and reference actions need no escaping. Write ``$${name}`` for a literal ``${name}``.

Variables (:func:`template_vars`): every run-context key (``today``, ``next_week_heading`` ...),
``workspace`` (the phase's workspace path) and every challenge fact prefixed with ``challenge_``
(``challenge_url``, ``challenge_token`` ...; dicts and lists as compact JSON).
"""

from __future__ import annotations

import json
import string
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Mapping

from .models.specs import (
    EditArgs, FixtureFile, ReadArgs, ReferenceEdit, ReferenceRead, ReferenceShell, ReferenceWrite, TestSpec,
    WriteArgs,
)

__all__ = ["make_run_values", "template_vars", "render", "render_test", "week_heading"]

_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def week_heading(monday: date) -> str:
    """Heading text (without ``#`` marks) of the weekly-plan section starting on ``monday``."""
    return f"Week of {monday.isoformat()}"


def make_run_values(now: datetime | None = None) -> dict[str, str]:
    """Everything date-dependent, computed once per run (local date unless ``now`` says otherwise).

    Keys: ``today`` (YYYY-MM-DD), ``weekday`` (English name), ``this_week_monday``,
    ``next_week_monday``, ``week_after_next_monday`` (YYYY-MM-DD; weeks start on Monday),
    ``this_week_heading``, ``next_week_heading``, ``week_after_next_heading`` (weekly-plan section
    headings, e.g. ``Week of 2025-03-10``) and ``run_started_at`` (ISO-8601 with UTC offset).
    """
    if now is None:
        now = datetime.now().astimezone()
    today = now.date()
    monday = today - timedelta(days=today.weekday())
    next_monday = monday + timedelta(days=7)
    after_next_monday = monday + timedelta(days=14)
    return {
        "today": today.isoformat(),
        "weekday": _WEEKDAYS[today.weekday()],
        "this_week_monday": monday.isoformat(),
        "next_week_monday": next_monday.isoformat(),
        "week_after_next_monday": after_next_monday.isoformat(),
        "this_week_heading": week_heading(monday),
        "next_week_heading": week_heading(next_monday),
        "week_after_next_heading": week_heading(after_next_monday),
        "run_started_at": now.isoformat(timespec="seconds"),
    }


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def template_vars(run_values: Mapping[str, Any], *, workspace: Path | str,
                  challenge_facts: Mapping[str, Any] | None) -> dict[str, str]:
    """The variables one phase's templates see (see the module docstring for the names)."""
    variables = {str(k): _as_text(v) for k, v in run_values.items()}
    variables["workspace"] = str(workspace)
    for key, value in (challenge_facts or {}).items():
        variables[f"challenge_{key}"] = _as_text(value)
    return variables


class _BracedTemplate(string.Template):
    """``${name}`` only; ``$${`` escapes; every other ``$`` is plain text."""

    pattern = r"""
    \$(?:
      (?P<escaped>\$(?=\{))                    |
      (?P<named>(?!))                          |
      \{(?P<braced>[_a-z][_a-z0-9]*)\}         |
      (?P<invalid>(?!))
    )
    """


def render(text: str, variables: Mapping[str, Any]) -> str:
    """Fill ``${name}`` placeholders from ``variables``; unknown names stay as written."""
    return _BracedTemplate(text).safe_substitute(variables)


def render_test(test: TestSpec, variables: Mapping[str, Any]) -> TestSpec:
    """A copy of ``test`` with its prompt, fixtures and reference actions rendered.

    Validators are left untouched: they resolve their own options when judging, from the recorded
    run context and the measured phase's challenge facts (so a rebuild judges the same way).
    """

    def r(text: str) -> str:
        return render(text, variables)

    reference: list[Any] = []
    for action in test.reference:
        if isinstance(action, ReferenceShell):
            reference.append(ReferenceShell(shell=r(action.shell)))
        elif isinstance(action, ReferenceWrite):
            reference.append(ReferenceWrite(write=WriteArgs(path=r(action.write.path),
                                                            content=r(action.write.content))))
        elif isinstance(action, ReferenceEdit):
            reference.append(ReferenceEdit(edit=EditArgs(path=r(action.edit.path), old=r(action.edit.old),
                                                         new=r(action.edit.new))))
        elif isinstance(action, ReferenceRead):
            reference.append(ReferenceRead(read=ReadArgs(path=r(action.read.path))))
        else:  # pragma: no cover - the union above is exhaustive
            reference.append(action)
    fixtures = [FixtureFile(path=f.path, content=r(f.content), mode=f.mode) for f in test.fixtures]
    return test.model_copy(update={"prompt": r(test.prompt), "fixtures": fixtures, "reference": reference})
