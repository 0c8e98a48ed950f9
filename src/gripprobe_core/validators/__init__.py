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
import re
from pathlib import PurePosixPath
from typing import Annotated, Any, Callable, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

from .context import Validator, ValidatorContext
from ..models.events import Event
from ..models.results import SourcePointer, ValidatorResult
from ..runvalues import render, template_vars
from ..telemetry.attempts import tool_attempts
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


#: How well a tool call that mentions the judged file explains where the file came from (best first); see
#: :func:`find_source` and docs/validators.md ("Source pointer").
_WRITES, _MENTIONS, _READS = 2, 1, 0
#: Kinds of call that cannot have produced a file's content.
_READ_KINDS = frozenset({"read", "search"})
#: A shell command is analysed up to this many characters (its start holds the command; a huge heredoc body
#: adds nothing).
_MAX_SHELL_CHARS = 100_000

#: A shell command as tokens: an operator (redirection, pipe, separator) or a word (quotes kept in it).
_SHELL_TOKEN = re.compile(r"""
    (?P<op>\d*(?:>>|>\||>&|>)|&>>|&>|<<<|<<-?|<|\|\||\||&&|;|&|\n|\(|\)|`|\$\()
  | (?P<word>(?:[^\s;&|<>()`'"]|'[^']*'|"(?:[^"\\]|\\.)*"|['"])+)
""", re.VERBOSE)
#: A line of code opening a file for writing, or writing one (Python, Node ...).
_CODE_WRITES = re.compile(
    r"""open\s*\([^)]*,\s*(?:mode\s*=\s*)?['"][rbt]*[wax+][rwaxbt+]*['"]|write_text|write_bytes|writeFile|\.write\(""")
#: Programs that run the rest of their command line as a command.
_WRAPPERS = frozenset({"sudo", "env", "command", "nohup", "exec", "time", "builtin"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})


def _names(value: str, name: str) -> bool:
    """Whether ``value`` is a path (one line) whose last component is ``name``."""
    value = value.strip()
    return bool(value) and "\n" not in value and PurePosixPath(value).name == name


def _parsed(arguments: Any) -> Any:
    """Arguments as a value: a string holding JSON (the proxy's view of a call) parsed, else as given."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


def _strings(value: Any, depth: int = 0) -> list[str]:
    """Every string among ``value``'s values (dict values and list items, nested), in order."""
    if isinstance(value, str):
        return [value]
    if depth > 20:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [s for item in items for s in _strings(item, depth + 1)]


def _path_values(value: Any, depth: int = 0) -> list[str]:
    """The strings under keys that name a path (``path``, ``file_path``, ``filename`` ...; not ``*_text`` or
    ``content``)."""
    found: list[str] = []
    if depth > 20:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            k = str(key).lower()
            if ("path" in k or "file" in k) and "text" not in k and "content" not in k:
                found.extend(s for s in _strings(item) if "\n" not in s.strip())
            else:
                found.extend(_path_values(item, depth + 1))
    elif isinstance(value, (list, tuple)):
        for item in value:
            found.extend(_path_values(item, depth + 1))
    return found


def _unquoted(word: str) -> str:
    return word.replace('"', "").replace("'", "")


def _shell_writes(text: str, name: str, depth: int = 0) -> bool:
    """Whether a shell command (or code run by one) plausibly writes a file called ``name``: a redirection
    to it (``>``, ``>>``, a heredoc's ``cat > f``), ``tee``, ``cp``/``mv``/``install`` to it, ``touch``,
    ``truncate``, ``sed -i``/``perl -i`` on it, ``dd of=``, ``curl -o``/``wget -O``, ``sh -c '…'`` doing any
    of these, or a line of code naming it that opens a file for writing or writes one."""
    text = text[:_MAX_SHELL_CHARS]
    if any(name in line and _CODE_WRITES.search(line) for line in text.splitlines()):
        return True
    command: list[tuple[str, str]] = []
    for match in _SHELL_TOKEN.finditer(text):
        op, word = match.group("op"), match.group("word")
        if op is not None and ">" not in op and "<" not in op:  # a separator: the simple command ends
            if _command_writes(command, name, depth):
                return True
            command = []
        else:
            command.append(("op", op) if op is not None else ("word", _unquoted(word)))
    return _command_writes(command, name, depth)


def _command_writes(tokens: list[tuple[str, str]], name: str, depth: int) -> bool:
    """Whether one simple command (its words and redirections) writes ``name``."""
    words: list[str] = []
    targets: list[str] = []
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        following = tokens[i + 1][1] if i + 1 < len(tokens) and tokens[i + 1][0] == "word" else None
        if kind == "word":
            words.append(value)
        elif following is not None:
            if ">" in value and not (value.endswith("&") and (following.isdigit() or following == "-")):
                targets.append(following)
            i += 1  # the redirection's file (or a heredoc's delimiter) is not an argument
        i += 1
    while words and (words[0] in _WRAPPERS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0], re.S)):
        words = words[1:]
    if words:
        program, args = PurePosixPath(words[0]).name, words[1:]
        plain = [a for a in args if not a.startswith("-")]
        if program in ("tee", "touch", "truncate"):
            targets += plain
        elif program in ("cp", "mv", "install", "rsync") and len(plain) >= 2:
            into_directory = plain[-1] in (".", "..", "~") or plain[-1].endswith("/") or "-t" in args
            targets += plain if into_directory else plain[-1:]
        elif program in ("sed", "perl") and any(
                a.startswith("--in-place") or (a.startswith("-") and not a.startswith("--") and "i" in a)
                for a in args):
            targets += plain
        elif program == "dd":
            targets += [a[3:] for a in args if a.startswith("of=")]
        elif program in ("curl", "wget"):
            for j, arg in enumerate(args):
                if arg in ("-o", "-O", "--output", "--output-document") and j + 1 < len(args):
                    targets.append(args[j + 1])
                elif arg.startswith(("--output=", "--output-document=")):
                    targets.append(arg.split("=", 1)[1])
                elif arg[:2] in ("-o", "-O") and len(arg) > 2:
                    targets.append(arg[2:])
        elif program in _SHELLS and depth < 3:
            for j, arg in enumerate(args[:-1]):
                if arg.startswith("-") and not arg.startswith("--") and "c" in arg:
                    if _shell_writes(args[j + 1], name, depth + 1):
                        return True
    return any(_names(t, name) for t in targets)


def _rank(payload: dict[str, Any], name: str) -> int:
    """How well a call whose arguments mention ``name`` explains the file: ``_WRITES`` (a write or edit of it,
    a command writing it), ``_MENTIONS``, ``_READS``."""
    kind = payload.get("kind") if isinstance(payload.get("kind"), str) else None
    arguments = _parsed(payload.get("arguments"))
    if kind == "write":  # a write or an edit: of this file, unless its path names another (then only its text does)
        paths = _path_values(arguments)
        return _WRITES if not paths or any(_names(p, name) for p in paths) else _MENTIONS
    if kind in _READ_KINDS:
        return _READS
    text = "\n".join(_strings(arguments))
    return _WRITES if _shell_writes(text, name) else _MENTIONS


def find_source(events: list[Event], path: str) -> SourcePointer | None:
    """The tool call that produced the file at ``path``, as a source pointer (SPEC §6); None when no call
    mentions the file.

    Among the ``tool_call_start`` events whose arguments mention the file's name, the best of: a call that
    writes it (a write or edit of it, or a shell command writing it: redirection, ``tee``, ``cp``/``mv``,
    ``sed -i``, code opening it for writing …, see :func:`_shell_writes`); any other call naming it (``cat``,
    ``grep``, a write of another file whose text names it, a tool of unknown kind); a read or search. Among
    equals the last whose call did not fail (its result, paired by
    :func:`~gripprobe_core.telemetry.attempts.tool_attempts`, is not ``error`` or ``timeout``); when all of
    them failed, the last. docs/validators.md has the rule.
    """
    name = PurePosixPath(path).name
    if not name:
        return None
    failed = {id(a.start) for a in tool_attempts(events) if a.start is not None and a.failed}
    best: tuple[int, bool] | None = None
    chosen: Event | None = None
    for event in events:
        if event.event_type != "tool_call_start":
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        if name not in _arguments_text(payload.get("arguments")):
            continue
        key = (_rank(payload, name), id(event) not in failed)
        if best is None or key >= best:
            best, chosen = key, event
    if chosen is None:
        return None
    return SourcePointer(kind="tool_call", sequence=chosen.sequence, event_type=chosen.event_type,
                         field_path=f"file:{path}", phase=chosen.phase)


def with_options(model: type[Options]) -> Callable[[Validator], Validator]:
    """Attach ``model`` to a validator function as ``options_model``."""

    def mark(fn: Validator) -> Validator:
        fn.options_model = model  # type: ignore[attr-defined]
        return fn

    return mark
