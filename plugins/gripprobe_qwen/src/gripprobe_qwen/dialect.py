"""How the oracle speaks to Qwen Code: the generic function-tools dialect, with absolute file paths.

Qwen Code 0.24.4 offers ``run_shell_command`` (``command``), ``write_file`` (``file_path``, ``content``),
``edit`` (``file_path``, ``old_string``, ``new_string``) and ``read_file`` (``file_path``) among ~14
function tools. Its file tools refuse a relative path before running ("File path must be absolute:
greeting.txt", ``errorType: invalid_tool_params``): every ``file_path`` description says "The absolute
path …", and the system prompt says "Relative paths are not supported". A model is expected to join
the project root, which Qwen Code states in its first user message ("I'm currently working in the
directory: /path/to/ws"), with the relative path.

The generic :class:`~gripprobe_core.plugin.ToolsDialect` says a test's relative path as it is, so
every write would fail. :class:`QwenDialect` does what a good model does: when a request states its
working directory and offers a file tool whose path parameter asks for an absolute path, the path of
each write, edit and read (and of the deliberately failing read or edit) is joined to that directory.
Shell commands are unchanged (the shell runs in the working directory).
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from gripprobe_core.plugin import (
    PATH_PARAMS, ChatRequest, ReferenceAction, ToolCall, ToolInfo, ToolsDialect, find_param, message_text,
)

__all__ = ["QwenDialect", "absolute_path", "wants_absolute_path", "working_directory"]

#: The sentence of Qwen Code's environment context naming the project root (first user message).
WORKDIR = re.compile(r"I'm currently working in the directory:[ \t]*(/[^\n]*?)[ \t]*$", re.MULTILINE)


def working_directory(request: ChatRequest) -> str | None:
    """The absolute working directory the request's user or system messages state; None when none does."""
    for msg in request.messages:
        if isinstance(msg, dict) and msg.get("role") in ("user", "system"):
            found = WORKDIR.search(message_text(msg))
            if found and found.group(1):
                return found.group(1)
    return None


def wants_absolute_path(tool: ToolInfo | None) -> bool:
    """Does the tool's path parameter ask for an absolute path (its description says so)?"""
    if tool is None:
        return False
    param = find_param(tool, PATH_PARAMS)
    schema = tool.properties.get(param) if param else None
    description = schema.get("description") if isinstance(schema, dict) else None
    return isinstance(description, str) and "absolute" in description.lower()


def absolute_path(directory: str, path: str) -> str:
    """``path`` joined to ``directory`` (an absolute ``path`` stays as it is), normalized."""
    return path if path.startswith("/") else posixpath.normpath(posixpath.join(directory, path))


class QwenDialect(ToolsDialect):
    """Requests that state a working directory and offer a file tool wanting absolute paths."""

    name = "qwen-code"

    def accepts(self, request: ChatRequest, format: str) -> bool:
        if working_directory(request) is None:
            return False
        return any(wants_absolute_path(tool) for tool in
                   (self.write_tool(request), self.edit_tool(request), self.read_tool(request)))

    def _direct_call(self, action: ReferenceAction, request: ChatRequest) -> ToolCall | None:
        return self.absolute(super()._direct_call(action, request), request)

    def failing_call(self, request: ChatRequest) -> ToolCall | None:
        return self.absolute(super().failing_call(request), request)

    def failing_edit(self, request: ChatRequest) -> ToolCall | None:
        return self.absolute(super().failing_edit(request), request)

    def absolute(self, call: ToolCall | None, request: ChatRequest) -> ToolCall | None:
        """``call`` with its path argument made absolute when its tool wants that; else ``call`` as it is."""
        if call is None or call.kind != "function":
            return call
        tool = request.tool(call.name)
        directory = working_directory(request)
        if directory is None or not wants_absolute_path(tool):
            return call
        param = find_param(tool, PATH_PARAMS) if tool is not None else None
        try:
            args: Any = json.loads(call.arguments)
        except ValueError:
            return call
        if not isinstance(args, dict) or not isinstance(args.get(param), str):
            return call
        return ToolCall.of(call.name, {**args, param: absolute_path(directory, args[param])})
