"""Built-in validators and what they share.

A validator is ``fn(ctx: ValidatorContext, options: dict) -> ValidatorResult`` (see
:func:`gripprobe_core.hookspecs.register_validators`). Validators read the measured workspace and
never change it; they never raise for anything the agent left behind (a missing file, binary
garbage, bad JSON): they return ``passed=False`` and say what they observed. Bad *options* (a spec
mistake) also come back as ``passed=False`` with ``message`` starting ``invalid options``; each
validator function carries its pydantic options model as ``fn.options_model`` so ``validate`` can
check specs before a run.

String options (paths, expected texts, commands) are rendered with the same ``${name}`` variables
the prompt saw in the measured phase (:func:`gripprobe_core.runvalues.template_vars`), built from
the recorded run context and challenge facts, so a rebuild judges exactly as the run did.

The families live in :mod:`.files`, :mod:`.patch`, :mod:`.web`, :mod:`.plan` and :mod:`.command`;
:mod:`gripprobe_core.defaults.validators` registers them.
"""

from __future__ import annotations

import json
import os
from pathlib import PurePosixPath
from typing import Annotated, Any, Callable, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from .context import Validator, ValidatorContext
from ..models.events import Event
from ..models.results import SourcePointer, ValidatorResult
from ..runvalues import render, template_vars
from .workspace import (
    MAX_READ_BYTES, FileRead, read_workspace_file, static_path_problem, workspace_directory, workspace_path_problem,
)

__all__ = [
    "INVALID_OPTIONS", "ExpectedRef", "FileRead", "Options", "WorkspacePath", "agent_workspace", "clip",
    "find_source", "invalid_options", "is_invalid_options", "normalize_text", "parse_options",
    "read_workspace_file", "render_path", "resolve_expected", "variables", "with_options", "workspace_directory",
]

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


#: How the message of a result that judged nothing because of the spec begins (see :func:`invalid_options`).
INVALID_OPTIONS = "invalid options for "


def invalid_options(kind: str, problem: str) -> ValidatorResult:
    """The result for options that are wrong (a spec error): ``passed=False`` and a message starting
    ``invalid options for <kind>:``. The runner makes such a case HARNESS_ERROR (failure_reason
    ``validator_error``): the agent is never blamed for the spec."""
    return ValidatorResult(kind=kind, passed=False, message=f"{INVALID_OPTIONS}{kind}: {problem}")


def is_invalid_options(result: ValidatorResult) -> bool:
    """Whether ``result`` is a spec error made by :func:`invalid_options` rather than a judgment."""
    return not result.passed and result.message.startswith(INVALID_OPTIONS)


def _check_workspace_path(value: str) -> str:
    problem = static_path_problem(value)
    if problem:
        raise ValueError(f"path {value!r} {problem}")
    return value


#: A path option relative to the measured workspace. Checked as written when the spec is validated
#: (``${name}`` standing for a plain name) and again, rendered, by :func:`render_path` at judgment time.
WorkspacePath = Annotated[str, AfterValidator(_check_workspace_path)]


def render_path(kind: str, path: str, values: dict[str, str]) -> tuple[str, ValidatorResult | None]:
    """``path`` rendered with ``values``, and an :func:`invalid_options` result when the rendered path
    leaves the workspace (a variable that held ``..`` or an absolute path): a spec error, not the agent's."""
    rendered = render(path, values)
    problem = workspace_path_problem(rendered)
    if problem is None:
        return rendered, None
    shown = repr(rendered) if rendered == path else f"{rendered!r} (rendered from {path!r})"
    return rendered, invalid_options(kind, f"path {shown} {problem}")


def agent_workspace(ctx: ValidatorContext) -> str:
    """The workspace path as the agent saw it (may differ from where the files are judged)."""
    return ctx.agent_workspace or str(ctx.workspace)


def variables(ctx: ValidatorContext) -> dict[str, str]:
    """Template variables of the measured phase (see :func:`gripprobe_core.runvalues.template_vars`)."""
    return template_vars(ctx.run_values, workspace=agent_workspace(ctx), challenge_facts=ctx.challenge)


def resolve_expected(ctx: ValidatorContext, expected: "str | ExpectedRef") -> tuple[list[str], str]:
    """Accepted expected texts (first is canonical) and a problem message ('' when resolved).

    ``workspace_path`` accepts both the path as given and its symlink-free form, since ``pwd`` may
    print either.
    """
    if isinstance(expected, str):
        return [render(expected, variables(ctx))], ""
    if expected.today:
        today = ctx.run_values.get("today")
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
