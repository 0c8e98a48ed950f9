"""``patch_applied``: a seeded file was changed as asked, and only as asked."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from .context import ValidatorContext
from ..models.results import ValidatorResult
from ..runvalues import render
from . import (
    Options, WorkspacePath, clip, find_source, invalid_options, normalize_text, parse_options, read_workspace_file,
    render_path, variables, with_options,
)


class PatchAppliedOptions(Options):
    path: WorkspacePath
    expected: str | None = None
    """The whole expected content after the change (rendered)."""
    contains: list[str] = Field(default_factory=list)
    """Texts that must appear in the file (rendered)."""
    not_contains: list[str] = Field(default_factory=list)
    """Texts that must not appear in the file (rendered)."""
    strip: bool = True
    """Compare ``expected`` after removing trailing whitespace and newlines (CRLF read as LF)."""

    @model_validator(mode="after")
    def _something_to_check(self) -> "PatchAppliedOptions":
        if self.expected is None and not self.contains and not self.not_contains:
            raise ValueError("give expected, contains or not_contains")
        return self


@with_options(PatchAppliedOptions)
def patch_applied(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """The file equals ``expected`` and/or holds every ``contains`` and none of ``not_contains``."""
    kind = "patch_applied"
    opts = parse_options(PatchAppliedOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    values = variables(ctx)
    path, bad_path = render_path(kind, opts.path, values)
    if bad_path:
        return bad_path
    expected = render(opts.expected, values) if opts.expected is not None else None
    contains = [render(c, values) for c in opts.contains]
    not_contains = [render(c, values) for c in opts.not_contains]

    wanted: list[str] = []
    if expected is not None:
        wanted.append(normalize_text(expected, strip=opts.strip))
    wanted += [f"contains: {c!r}" for c in contains] + [f"does not contain: {c!r}" for c in not_contains]
    shown_expected = clip("\n".join(wanted))

    read = read_workspace_file(ctx, path)
    if read.text is None:
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=read.observed,
                               message=f"{path}: {read.problem}")
    text = normalize_text(read.text, strip=False)
    problems: list[str] = []
    if expected is not None and normalize_text(text, strip=opts.strip) != normalize_text(expected, strip=opts.strip):
        problems.append("content differs from the expected result")
    problems += [f"missing {c!r}" for c in contains if c not in text]
    problems += [f"still contains {c!r}" for c in not_contains if c in text]
    passed = not problems
    message = f"{path} patched as expected" if passed else f"{path}: " + "; ".join(problems)
    return ValidatorResult(kind=kind, passed=passed, expected=shown_expected,
                           observed=clip(normalize_text(text, strip=opts.strip)), message=clip(message, 1000),
                           source=find_source(ctx.events, path))
