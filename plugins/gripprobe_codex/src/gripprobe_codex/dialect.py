"""How the oracle speaks to codex: the generic function-tools dialect, plus codex's freeform ``apply_patch``.

codex offers ``exec_command`` (a shell) and ``apply_patch``, a *custom* tool whose input is a patch in
the V4A format (``*** Begin Patch`` … ``*** End Patch``); older codex versions offered ``apply_patch`` as
a function tool taking one string. :class:`CodexDialect` says writes and edits as such a patch when the
request offers the tool, and everything else as :class:`~gripprobe_core.plugin.ToolsDialect` would. A
patch that cannot say an action exactly (content without a final newline, an edit whose surrounding
lines are unknown) is used only when there is no shell tool to do it exactly instead.
"""

from __future__ import annotations

from gripprobe_core.plugin import (
    MISSING_FILE, ChatRequest, ReferenceAction, ReferenceEdit, ReferenceWrite, ToolCall, ToolInfo, ToolsDialect, Turn,
    fill_required, norm,
)

__all__ = ["CodexDialect", "add_file_patch", "rough_update_patch", "update_file_patch"]

#: Names of the patch tool (compared via :func:`~gripprobe_core.plugin.norm`).
PATCH_NAMES = frozenset({"applypatch"})


class CodexDialect(ToolsDialect):
    """Any request that offers ``apply_patch`` (codex's; other agents that offer it take it too)."""

    name = "codex-apply-patch"
    shell_names = ToolsDialect.shell_names | {"execcommand", "localshell"}

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return self.patch_tool(request) is not None

    def patch_tool(self, request: ChatRequest) -> ToolInfo | None:
        """The freeform (custom) ``apply_patch`` tool, else a function tool of that name taking one string."""
        for t in request.custom_tools:
            if norm(t.name) in PATCH_NAMES:
                return t
        for t in request.tools:
            if norm(t.name) in PATCH_NAMES and (self._single_string_param(t) or "input" in t.properties):
                return t
        return None

    def _say(self, action: ReferenceAction, index: int, request: ChatRequest, known: str | None) -> Turn:
        turn = self._patch_turn(action, index, request, known)
        return turn if turn is not None else self.say_with_functions(action, index, request)

    def _patch_turn(self, action: ReferenceAction, index: int, request: ChatRequest, known: str | None) -> Turn | None:
        tool = self.patch_tool(request)
        if tool is None or not isinstance(action, (ReferenceWrite, ReferenceEdit)):
            return None
        if isinstance(action, ReferenceWrite):
            patch = add_file_patch(action.write.path, action.write.content)
        else:
            patch = update_file_patch(action.edit.path, action.edit.old, action.edit.new, known)
        if patch is None:
            if self.shell_tool(request) is not None or self.say_with_functions(action, index, request).tool_call:
                return None
            if isinstance(action, ReferenceWrite):
                patch = add_file_patch(action.write.path, action.write.content + "\n")
            else:
                patch = rough_update_patch(action.edit.path, action.edit.old, action.edit.new)
        if patch is None:
            return None
        return Turn(tool_call=self.patch_call(tool, patch), action_index=index)

    def patch_call(self, tool: ToolInfo, patch: str) -> ToolCall:
        """The call that sends ``patch`` to a patch tool (raw input for a custom tool)."""
        if tool.kind == "custom":
            return ToolCall(tool.name, patch, kind="custom")
        param = self._single_string_param(tool) or "input"
        return ToolCall.of(tool.name, fill_required(tool, {param: patch}))

    def failing_edit(self, request: ChatRequest) -> ToolCall | None:
        """A patch of the missing file (bound to fail), before the generic dialect's edit."""
        patch = self.patch_tool(request)
        if patch is not None:
            return self.patch_call(patch, rough_update_patch(MISSING_FILE, "missing\n", "present\n") or "")
        return super().failing_edit(request)


# ------------------------------------------------------------------------------------- V4A patches

def add_file_patch(path: str, content: str) -> str | None:
    """``*** Add File`` creating ``path`` with exactly ``content``; None when V4A cannot say it
    (empty content, content without a final newline, a path with a newline)."""
    if not content.endswith("\n") or "\n" in path or not path:
        return None
    body = "".join(f"+{line}\n" for line in content[:-1].split("\n"))
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def update_file_patch(path: str, old: str, new: str, content: str | None, context: int = 3) -> str | None:
    """``*** Update File`` replacing the one occurrence of ``old`` in ``content`` (the file as it is)
    with ``new``, as whole-line ``-``/``+`` lines after up to ``context`` lines of context.

    None when it cannot be said exactly: content unknown or without a final newline, ``old`` not
    found exactly once, a replacement that would join two lines, or lines that are not unique."""
    if content is None or not old or content.count(old) != 1 or not content.endswith("\n") or "\n" in path:
        return None
    pos = content.index(old)
    end = pos + len(old)
    start = content.rfind("\n", 0, pos) + 1
    stop = end if content[end - 1] == "\n" else content.index("\n", end) + 1
    old_block = content[start:stop]
    new_block = content[start:pos] + new + content[end:stop]
    if new_block and not new_block.endswith("\n"):
        return None
    file_lines = content[:-1].split("\n")
    first = content.count("\n", 0, start)
    before = file_lines[max(0, first - context):first]
    old_lines = old_block[:-1].split("\n")
    new_lines = new_block[:-1].split("\n") if new_block else []
    if _count_runs(file_lines, before + old_lines) != 1:
        return None
    hunk = ("@@\n" + "".join(f" {line}\n" for line in before) + "".join(f"-{line}\n" for line in old_lines)
            + "".join(f"+{line}\n" for line in new_lines))
    return f"*** Begin Patch\n*** Update File: {path}\n{hunk}*** End Patch\n"


def rough_update_patch(path: str, old: str, new: str) -> str | None:
    """An ``*** Update File`` taking ``old`` and ``new`` as whole lines (right when ``old`` is whole lines
    of the file); the best a patch can do when the file content is unknown."""
    if not old or "\n" in path or not path:
        return None
    old_lines = old.removesuffix("\n").split("\n")
    new_lines = new.removesuffix("\n").split("\n") if new else []
    hunk = "@@\n" + "".join(f"-{line}\n" for line in old_lines) + "".join(f"+{line}\n" for line in new_lines)
    return f"*** Begin Patch\n*** Update File: {path}\n{hunk}*** End Patch\n"


def _count_runs(lines: list[str], run: list[str]) -> int:
    n = len(run)
    return sum(1 for i in range(len(lines) - n + 1) if lines[i:i + n] == run)
