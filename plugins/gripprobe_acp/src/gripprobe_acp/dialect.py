"""How the oracle speaks to Qwen Code in ACP mode: the generic tools dialect with absolute file paths.

Qwen Code's file tools (``write_file``, ``edit``, ``read_file``) refuse a relative path ("File path must be
absolute"); each ``file_path`` description asks for an absolute path, and its first user message states the
project root ("I'm currently working in the directory: /…"). The generic dialect says a test's path as it is,
so every write would fail; this one joins that directory to the path of each write, edit and read (also of the
deliberately failing ones). Shell commands are unchanged. Qwen Code's own plugin brings a dialect for the same
requests; this one stands alone so that ``acp-qwen`` works without it installed (both say the same calls).
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from gripprobe_core.plugin import (
    PATH_PARAMS, ChatRequest, ReferenceAction, ToolCall, ToolInfo, ToolsDialect, find_param, message_text,
)

__all__ = ["AbsolutePathDialect", "stated_directory", "wants_absolute_path"]

#: The sentence naming the working directory in Qwen Code's first user message.
STATED = re.compile(r"I'm currently working in the directory:[ \t]*(/[^\n]*?)[ \t]*$", re.MULTILINE)


def stated_directory(request: ChatRequest) -> str | None:
    """The absolute working directory a user or system message states, else None."""
    for msg in request.messages:
        if isinstance(msg, dict) and msg.get("role") in ("user", "system"):
            found = STATED.search(message_text(msg))
            if found:
                return found.group(1)
    return None


def wants_absolute_path(tool: ToolInfo | None) -> bool:
    """Does the tool's path parameter's description ask for an absolute path?"""
    if tool is None:
        return False
    param = find_param(tool, PATH_PARAMS)
    schema = tool.properties.get(param) if param else None
    described = schema.get("description") if isinstance(schema, dict) else None
    return isinstance(described, str) and "absolute" in described.lower()


class AbsolutePathDialect(ToolsDialect):
    """Requests that state a working directory and offer a file tool wanting absolute paths."""

    name = "acp-absolute-paths"

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return stated_directory(request) is not None and any(
            wants_absolute_path(t) for t in (self.write_tool(request), self.edit_tool(request), self.read_tool(request)))

    def _direct_call(self, action: ReferenceAction, request: ChatRequest) -> ToolCall | None:
        return self._absolute(super()._direct_call(action, request), request)

    def failing_call(self, request: ChatRequest) -> ToolCall | None:
        return self._absolute(super().failing_call(request), request)

    def failing_edit(self, request: ChatRequest) -> ToolCall | None:
        return self._absolute(super().failing_edit(request), request)

    def _absolute(self, call: ToolCall | None, request: ChatRequest) -> ToolCall | None:
        if call is None or call.kind != "function":
            return call
        tool = request.tool(call.name)
        directory = stated_directory(request)
        if directory is None or tool is None or not wants_absolute_path(tool):
            return call
        param = find_param(tool, PATH_PARAMS)
        try:
            args: Any = json.loads(call.arguments)
        except ValueError:
            return call
        if not isinstance(args, dict) or not isinstance(args.get(param), str) or args[param].startswith("/"):
            return call
        joined = posixpath.normpath(posixpath.join(directory, args[param]))
        return ToolCall.of(call.name, {**args, param: joined})
