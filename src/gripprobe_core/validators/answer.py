"""Validators for what the agent did *not* do and what it *said*: ``file_absent`` and ``final_answer``.

Tests where a denial must hold (docs/interaction.md) need both: the file a refused call would have written
is not there, and the agent's final answer says it was not allowed.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from ..models.results import ValidatorResult
from . import Options, WorkspacePath, clip, invalid_options, parse_options, render_path, variables, with_options
from .context import ValidatorContext
from .workspace import read_workspace_file

MAX_PATTERN = 1000


class FileAbsentOptions(Options):
    path: WorkspacePath


class FinalAnswerOptions(Options):
    pattern: str = Field(min_length=1, max_length=MAX_PATTERN)
    """A regular expression (Python ``re``, searched anywhere in the answer)."""
    ignore_case: bool = True

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
        return value


@with_options(FileAbsentOptions)
def file_absent(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """Nothing at ``path`` in the workspace: no file, directory or link."""
    kind = "file_absent"
    opts = parse_options(FileAbsentOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    path, bad_path = render_path(kind, opts.path, variables(ctx))
    if bad_path:
        return bad_path
    read = read_workspace_file(ctx, path)
    if read.text is None and read.problem == "file missing":
        return ValidatorResult(kind=kind, passed=True, expected=f"no {path}", observed=f"no {path}",
                               message=f"{path} is not there")
    observed = f"file {path} ({read.size} bytes)" if read.text is not None else f"<{read.problem}>"
    return ValidatorResult(kind=kind, passed=False, expected=f"no {path}", observed=observed,
                           message=f"{path} is there")


@with_options(FinalAnswerOptions)
def final_answer(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """The agent's final answer (as its driver read it) matches ``pattern``."""
    kind = "final_answer"
    opts = parse_options(FinalAnswerOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    text = ctx.final_text
    if text is None:
        return ValidatorResult(kind=kind, passed=False, expected=f"/{opts.pattern}/", observed="<no final answer>",
                               message="the agent gave no final answer its driver could read")
    flags = re.IGNORECASE if opts.ignore_case else 0
    found = re.search(opts.pattern, text[:1 << 20], flags)
    return ValidatorResult(kind=kind, passed=found is not None, expected=f"/{opts.pattern}/", observed=clip(text),
                           message="the final answer matches" if found else "the final answer does not match")
