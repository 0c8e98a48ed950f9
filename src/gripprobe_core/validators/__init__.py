"""Built-in validators and what they share.

A validator is ``fn(ctx: ValidatorContext, options: dict) -> ValidatorResult`` (see
:func:`gripprobe_core.hookspecs.register_validators`). Validators read the measured workspace and
never change it; they never raise for anything the agent left behind (a missing file, binary
garbage, bad JSON): they return ``passed=False`` and say what they observed. Bad *options* (a spec
mistake) also come back as ``passed=False`` with ``message`` starting ``invalid options``; each
validator function carries its pydantic options model as ``fn.options_model`` so ``validate`` can
check specs before a run.

String options (paths, expected texts, commands) are rendered with the same ``${name}`` variables
the prompt saw in the measured phase (:func:`gripprobe_core.runcontext.template_vars`), built from
the recorded run context and challenge facts, so a rebuild judges exactly as the run did.

The families live in :mod:`.files`, :mod:`.patch`, :mod:`.web`, :mod:`.plan` and :mod:`.command`;
:mod:`gripprobe_core.builtins.validators` registers them.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..context import Validator, ValidatorContext
from ..models.events import Event
from ..models.results import SourcePointer, ValidatorResult
from ..runcontext import render, template_vars

__all__ = [
    "ExpectedRef", "FileRead", "Options", "agent_workspace", "clip", "find_source", "invalid_options",
    "normalize_text", "parse_options", "read_workspace_file", "resolve_expected", "variables", "with_options",
]

#: Files larger than this are judged on their first MAX_READ_BYTES bytes.
MAX_READ_BYTES = 1024 * 1024
#: Longest expected/observed text kept in a result.
MAX_SHOWN_CHARS = 4000


class Options(BaseModel):
    """Base of every validator's options model: unknown keys are spec errors."""

    model_config = ConfigDict(extra="forbid")


class ExpectedRef(Options):
    """An expected value computed at judgment time instead of written in the spec.

    Exactly one of: ``today: true`` (the run's date), ``workspace_path: true`` (the measured
    workspace as the agent saw it), ``var: NAME`` (a template variable: a run-context key or
    ``challenge_<fact>``).
    """

    today: bool = False
    workspace_path: bool = False
    var: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "ExpectedRef":
        chosen = [self.today, self.workspace_path, self.var is not None]
        if sum(bool(c) for c in chosen) != 1:
            raise ValueError("give exactly one of today: true, workspace_path: true, var: NAME")
        return self


O = TypeVar("O", bound=Options)


def parse_options(model: type[O], options: dict[str, Any]) -> O | str:
    """The parsed options, or a one-line explanation of what is wrong with them."""
    try:
        return model.model_validate(options or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(options)'}: {err['msg']}" for err in exc.errors())
        return problems


def invalid_options(kind: str, problem: str) -> ValidatorResult:
    return ValidatorResult(kind=kind, passed=False, message=f"invalid options for {kind}: {problem}")


def agent_workspace(ctx: ValidatorContext) -> str:
    """The workspace path as the agent saw it (may differ from where the files are judged)."""
    return ctx.agent_workspace or str(ctx.workspace)


def variables(ctx: ValidatorContext) -> dict[str, str]:
    """Template variables of the measured phase (see :func:`gripprobe_core.runcontext.template_vars`)."""
    return template_vars(ctx.run_context, workspace=agent_workspace(ctx), challenge_facts=ctx.challenge)


def resolve_expected(ctx: ValidatorContext, expected: "str | ExpectedRef") -> tuple[list[str], str]:
    """Accepted expected texts (first is canonical) and a problem message ('' when resolved).

    ``workspace_path`` accepts both the path as given and its symlink-free form, since ``pwd`` may
    print either.
    """
    if isinstance(expected, str):
        return [render(expected, variables(ctx))], ""
    if expected.today:
        today = ctx.run_context.get("today")
        if not today:
            return [], "run context has no 'today'"
        return [str(today)], ""
    if expected.workspace_path:
        seen = agent_workspace(ctx)
        accepted = [seen]
        real = os.path.realpath(seen)
        if real != seen:
            accepted.append(real)
        return accepted, ""
    name = expected.var or ""
    values = variables(ctx)
    if name not in values:
        known = ", ".join(sorted(values))
        return [], f"unknown variable {name!r} (known: {known})"
    return [values[name]], ""


@dataclass
class FileRead:
    """One workspace file as a validator sees it: ``text`` is None when it could not be read."""

    path: str
    text: str | None
    problem: str = ""
    size: int = 0
    truncated: bool = False
    valid_utf8: bool = True

    @property
    def observed(self) -> str:
        """What to show as observed when ``text`` is None."""
        return f"<{self.problem}>"


def read_workspace_file(ctx: ValidatorContext, rel_path: str) -> FileRead:
    """Read ``rel_path`` from the measured workspace without ever raising.

    Only regular files inside the workspace are read (a path escaping it, a directory, a FIFO or a
    symlink pointing outside all give ``text=None`` with a ``problem``). Bytes are decoded as UTF-8
    with replacement characters, so binary garbage still yields text.
    """
    pure = PurePosixPath(rel_path)
    if not rel_path or pure.is_absolute() or ".." in pure.parts:
        return FileRead(rel_path, None, "path must be relative and inside the workspace")
    root = Path(ctx.workspace)
    target = root / rel_path
    try:
        resolved = target.resolve()
        if not resolved.is_relative_to(root.resolve()):
            return FileRead(rel_path, None, "path resolves outside the workspace")
        st = resolved.stat()
    except FileNotFoundError:
        return FileRead(rel_path, None, "file missing")
    except (OSError, RuntimeError) as exc:  # RuntimeError: symlink loop on older Pythons
        return FileRead(rel_path, None, f"cannot stat: {type(exc).__name__}")
    if stat.S_ISDIR(st.st_mode):
        return FileRead(rel_path, None, "is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        return FileRead(rel_path, None, "not a regular file")
    try:
        with open(resolved, "rb") as fh:
            data = fh.read(MAX_READ_BYTES + 1)
    except OSError as exc:
        return FileRead(rel_path, None, f"cannot read: {type(exc).__name__}")
    truncated = len(data) > MAX_READ_BYTES
    data = data[:MAX_READ_BYTES]
    try:
        text = data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        valid = False
    return FileRead(rel_path, text, size=st.st_size, truncated=truncated, valid_utf8=valid)


def normalize_text(text: str, *, strip: bool) -> str:
    """CRLF → LF, and with ``strip`` trailing whitespace and newlines removed."""
    text = text.replace("\r\n", "\n")
    return text.rstrip() if strip else text


def clip(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying so when it was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... <{len(text) - limit} more characters>"


def _arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(arguments)


def find_source(events: list[Event], path: str) -> SourcePointer | None:
    """The last tool call whose arguments mention ``path``, as a source pointer (SPEC §6).

    "Mention" means the file's name appears in the call's arguments (a write or edit of the path, a
    shell command writing it ...). Calls of kind ``read`` are only used when nothing else mentions
    the file, since a read cannot have produced its content. None when no call mentions it.
    """
    name = PurePosixPath(path).name
    if not name:
        return None
    fallback: Event | None = None
    chosen: Event | None = None
    for event in events:
        if event.event_type != "tool_call_start":
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        if name not in _arguments_text(payload.get("arguments")):
            continue
        if payload.get("kind") == "read":
            fallback = event
        else:
            chosen = event
    event = chosen or fallback
    if event is None:
        return None
    return SourcePointer(kind="tool_call", sequence=event.sequence, event_type=event.event_type,
                         field_path=f"file:{path}", phase=event.phase)


def with_options(model: type[Options]) -> Callable[[Validator], Validator]:
    """Attach ``model`` to a validator function as ``options_model``."""

    def mark(fn: Validator) -> Validator:
        fn.options_model = model  # type: ignore[attr-defined]
        return fn

    return mark
