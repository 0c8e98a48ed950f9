"""File validators: ``file_equals`` and ``file_exists``."""

from __future__ import annotations

from typing import Any

from .context import ValidatorContext
from ..models.results import ValidatorResult
from . import (
    ExpectedRef, Options, WorkspacePath, clip, find_source, invalid_options, normalize_text, parse_options,
    read_workspace_file, render_path, resolve_expected, variables, with_options,
)


class FileEqualsOptions(Options):
    path: WorkspacePath
    expected: str | ExpectedRef
    strip: bool = True
    """Compare after removing trailing whitespace and newlines (and turning CRLF into LF)."""


class FileExistsOptions(Options):
    path: WorkspacePath


@with_options(FileEqualsOptions)
def file_equals(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """The file's content equals ``expected`` (a literal, rendered; or ``today``/``workspace_path``/``var``)."""
    kind = "file_equals"
    opts = parse_options(FileEqualsOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    path, bad_path = render_path(kind, opts.path, variables(ctx))
    if bad_path:
        return bad_path
    accepted, problem = resolve_expected(ctx, opts.expected)
    if problem:
        return invalid_options(kind, problem)
    shown_expected = clip(accepted[0])
    read = read_workspace_file(ctx, path)
    if read.text is None:
        return ValidatorResult(kind=kind, passed=False, expected=shown_expected, observed=read.observed,
                               message=f"{path}: {read.problem}")
    observed = normalize_text(read.text, strip=opts.strip)
    passed = any(observed == normalize_text(a, strip=opts.strip) for a in accepted)
    if passed:
        message = f"{path} has the expected content"
    elif not read.valid_utf8:
        message = f"{path} is not valid UTF-8 text"
    else:
        message = f"{path} differs from the expected content"
    return ValidatorResult(kind=kind, passed=passed, expected=shown_expected, observed=clip(observed),
                           message=message, source=find_source(ctx.events, path))


@with_options(FileExistsOptions)
def file_exists(ctx: ValidatorContext, options: dict[str, Any]) -> ValidatorResult:
    """A regular file exists at ``path`` inside the workspace."""
    kind = "file_exists"
    opts = parse_options(FileExistsOptions, options)
    if isinstance(opts, str):
        return invalid_options(kind, opts)
    path, bad_path = render_path(kind, opts.path, variables(ctx))
    if bad_path:
        return bad_path
    read = read_workspace_file(ctx, path)
    if read.text is None:
        return ValidatorResult(kind=kind, passed=False, expected=f"file {path}", observed=read.observed,
                               message=f"{path}: {read.problem}")
    return ValidatorResult(kind=kind, passed=True, expected=f"file {path}", observed=f"file {path} ({read.size} bytes)",
                           message=f"{path} exists", source=find_source(ctx.events, path))
