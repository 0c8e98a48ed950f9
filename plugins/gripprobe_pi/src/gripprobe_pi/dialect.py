"""How the oracle speaks to pi: the generic function-tools dialect, plus pi's ``edit`` tool.

pi offers four function tools (Chat Completions): ``read {path, offset?, limit?}``, ``bash {command,
timeout?}``, ``write {path, content}`` and ``edit {path, edits}``, where ``edits`` is a list of
``{oldText, newText}`` replacements, each matched against the original file. The generic
:class:`~gripprobe_core.plugin.ToolsDialect` drives read, bash and write, but finds no old/new text
among ``edit``'s own parameters and would do every edit through ``bash`` instead. :class:`PiDialect`
says an edit as pi's ``edit`` call with one replacement, for any request that offers a tool with a path
and a list of old/new replacements (pi's; another agent with such a tool takes it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from gripprobe_core.plugin import (
    MISSING_FILE, PATH_PARAMS, ChatRequest, ReferenceAction, ReferenceEdit, ToolCall, ToolInfo, ToolsDialect, Turn,
    accepts_type, fill_required, find_param, norm,
)

__all__ = ["PiDialect", "EditsTool"]

#: Names of an edit's old and new text inside one replacement (compared via norm()): pi's ``oldText`` and
#: ``newText``, and the spellings the generic dialect knows for top-level parameters.
OLD_TEXT = ("oldtext", "oldstring", "oldstr", "old", "search")
NEW_TEXT = ("newtext", "newstring", "newstr", "new", "replace", "replacement")


@dataclass(frozen=True)
class EditsTool:
    """A tool taking a path and a list of replacements, with its own parameter names."""

    tool: ToolInfo
    path: str
    edits: str
    item: ToolInfo
    old: str
    new: str

    def call(self, path: str, old: str, new: str) -> ToolCall:
        replacement = fill_required(self.item, {self.old: old, self.new: new})
        return ToolCall.of(self.tool.name, fill_required(self.tool, {self.path: path, self.edits: [replacement]}))


def edits_tool_of(tool: ToolInfo) -> EditsTool | None:
    """``tool`` as an :class:`EditsTool`: a path parameter and an array parameter whose items are
    objects with an old and a new text; None when it is not one."""
    path = find_param(tool, PATH_PARAMS)
    if path is None:
        return None
    for name, schema in tool.properties.items():
        if not accepts_type(schema, "array"):
            continue
        items = schema.get("items")
        if not isinstance(items, dict) or not accepts_type(items, "object"):
            continue
        item = ToolInfo(name=name, parameters=items)
        old, new = find_param(item, OLD_TEXT), find_param(item, NEW_TEXT)
        if old and new and old != new:
            return EditsTool(tool, path, name, item, old, new)
    return None


class PiDialect(ToolsDialect):
    """Any request offering a tool with a path and a list of ``{oldText, newText}`` replacements."""

    name = "pi-edits"

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return self.edits_tool(request) is not None

    def edits_tool(self, request: ChatRequest) -> EditsTool | None:
        """The edit-named tool of that shape first, then any tool of that shape."""
        found = [e for t in request.tools if (e := edits_tool_of(t)) is not None]
        named = [e for e in found if norm(e.tool.name) in self.edit_names]
        candidates = named or found
        return candidates[0] if candidates else None

    def _say(self, action: ReferenceAction, index: int, request: ChatRequest, known: str | None) -> Turn:
        if isinstance(action, ReferenceEdit) and self.edit_tool(request) is None:
            tool = self.edits_tool(request)
            if tool is not None:
                edit = action.edit
                return Turn(tool_call=tool.call(edit.path, edit.old, edit.new), action_index=index)
        return super()._say(action, index, request, known)

    def failing_edit(self, request: ChatRequest) -> ToolCall | None:
        """An edit of the missing file (bound to fail), when the generic dialect has none."""
        generic = super().failing_edit(request)
        if generic is not None:
            return generic
        tool = self.edits_tool(request)
        return tool.call(MISSING_FILE, "missing", "present") if tool is not None else None

