"""The reference agent's four tools: shell, read, write, edit. Standard library only.

Every tool works inside one workspace directory. A tool never raises for bad input from the model:
:meth:`Toolbox.run` returns a :class:`ToolOutcome` with ``status="error"`` and a message the model can
act on. Only a bug escapes as an exception (the loop then aborts with exit code 4).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL_OUTPUT_LIMIT = 20_000
"""Characters of tool output sent back to the model (head and tail kept)."""

READ_LIMIT_BYTES = 1_000_000


def _fn(name: str, description: str, props: dict[str, str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object",
                       "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
                       "required": list(props), "additionalProperties": False}}}


TOOL_SCHEMAS: list[dict[str, Any]] = [
    _fn("shell", "Run a bash command in the workspace. Returns the exit code and combined stdout/stderr.",
        {"command": "The bash command to run."}),
    _fn("read", "Read a text file from the workspace.", {"path": "File path, relative to the workspace."}),
    _fn("write", "Create or overwrite a file with the given content (parent directories are created).",
        {"path": "File path, relative to the workspace.", "content": "The complete new file content."}),
    _fn("edit", "Replace exactly one occurrence of `old` with `new` in a file.",
        {"path": "File path, relative to the workspace.", "old": "Exact text to replace (must occur once).",
         "new": "Replacement text."}),
]

TOOL_NAMES = tuple(s["function"]["name"] for s in TOOL_SCHEMAS)


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


@dataclass
class ToolOutcome:
    status: str  # "success" | "error"
    output: str
    exit_code: int | None = None
    duration_ms: float = 0.0


def truncate(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping head and tail, marking the cut."""
    if len(text) <= limit:
        return text
    half = max(1, limit // 2)
    return f"{text[:half]}\n…[{len(text) - 2 * half} characters truncated]…\n{text[-half:]}"


def parse_arguments(raw: str) -> dict[str, Any]:
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise ToolError(f"invalid arguments: not JSON ({exc})") from None
    if not isinstance(args, dict):
        raise ToolError("invalid arguments: expected a JSON object")
    return args


def string_arg(args: dict[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"invalid arguments: {key!r} must be a string")
    return value


class Toolbox:
    """The tools of one session, bound to ``workspace``."""

    def __init__(self, workspace: Path, timeout_s: float = 60.0) -> None:
        self.workspace = workspace.resolve()
        self.timeout_s = timeout_s

    def run(self, name: str, raw_arguments: str) -> ToolOutcome:
        """Run tool ``name`` with its raw JSON arguments; errors become an error outcome."""
        started = time.monotonic()
        try:
            args = parse_arguments(raw_arguments)
            if name == "shell":
                outcome = self.shell(string_arg(args, "command"))
            elif name == "read":
                outcome = ToolOutcome("success", self.read(string_arg(args, "path")))
            elif name == "write":
                outcome = ToolOutcome("success", self.write(string_arg(args, "path"), string_arg(args, "content")))
            elif name == "edit":
                outcome = ToolOutcome("success", self.edit(
                    string_arg(args, "path"), string_arg(args, "old"), string_arg(args, "new")))
            else:
                raise ToolError(f"unknown tool {name!r}; available: {', '.join(TOOL_NAMES)}")
        except ToolError as exc:
            outcome = ToolOutcome("error", f"error: {exc}")
        except (OSError, UnicodeError) as exc:
            outcome = ToolOutcome("error", f"error: {type(exc).__name__}: {exc}")
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 1)
        return outcome

    def resolve(self, path: str) -> Path:
        """``path`` (relative to the workspace, or absolute inside it) resolved; refuses escapes."""
        if not path or "\0" in path:
            raise ToolError("invalid path")
        target = Path(path)
        resolved = (target if target.is_absolute() else self.workspace / target).resolve()
        if resolved != self.workspace and not resolved.is_relative_to(self.workspace):
            raise ToolError(f"path {path!r} is outside the workspace")
        return resolved

    def shell(self, command: str) -> ToolOutcome:
        """``bash -c command`` in the workspace; kills its whole process group on timeout."""
        proc = subprocess.Popen(["bash", "-c", command], cwd=self.workspace, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, _ = proc.communicate()
            text = out.decode("utf-8", "replace")
            return ToolOutcome("error", truncate(f"timed out after {self.timeout_s:g} s\n{text}",
                                                 MODEL_OUTPUT_LIMIT), exit_code=proc.returncode)
        text = out.decode("utf-8", "replace")
        status = "success" if proc.returncode == 0 else "error"
        return ToolOutcome(status, truncate(f"exit code: {proc.returncode}\n{text}", MODEL_OUTPUT_LIMIT),
                           exit_code=proc.returncode)

    def read(self, path: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory")
        if not target.exists():
            raise ToolError(f"{path!r} does not exist")
        with target.open("rb") as fh:
            data = fh.read(READ_LIMIT_BYTES + 1)
        text = data[:READ_LIMIT_BYTES].decode("utf-8", "replace")
        return truncate(text, MODEL_OUTPUT_LIMIT)

    def write(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path!r} is a directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        target.write_bytes(data)
        return f"wrote {len(data)} bytes to {path}"

    def edit(self, path: str, old: str, new: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ToolError(f"{path!r} does not exist or is not a file")
        if not old:
            raise ToolError("'old' must not be empty")
        try:
            text = target.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{path!r} is not UTF-8 text") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"'old' text not found in {path}")
        if count > 1:
            raise ToolError(f"'old' text is ambiguous in {path}: {count} matches; include more context")
        target.write_bytes(text.replace(old, new, 1).encode("utf-8"))
        return f"edited {path}: replaced 1 occurrence"
