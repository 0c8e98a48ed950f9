"""How the oracle speaks to Cline: its ``run_commands``, ``editor``, ``read_files`` and ``apply_patch``.

Cline's tools do not fit the generic :class:`~gripprobe_core.plugin.ToolsDialect` (measured on cline
3.0.65, act mode, Chat Completions):

- ``run_commands`` takes ``commands``, an array of *complete shell command strings* (run one after the
  other), not an argv: one command is ``{"commands": ["<command>"]}``. The generic dialect finds no
  shell in it (its name and its ``commands`` parameter are neither a known shell name nor ``command``).
- ``editor`` takes ``path``, ``new_text`` and an optional ``old_text``: without ``old_text`` it creates a
  *missing* file with ``new_text`` (and refuses an existing one), with it it replaces the one occurrence.
  So a write is ``{"path", "new_text"}``; the generic dialect sees no write tool in it (it has an
  old-text parameter).
- ``read_files`` takes ``files``, an array of ``{"path", "start_line"?, "end_line"?}``.
- For model ids containing ``gpt`` or ``codex`` (and the ``openai-native`` provider) Cline offers
  ``apply_patch`` (a function tool taking ``input``, a V4A patch) instead of ``editor``: writes are then
  ``*** Add File`` patches, edits go through the shell (exact, see ``shell_command_for``).

Paths are said as the test gives them (relative to the workspace): Cline resolves a relative path
against its working directory. A write to a file an earlier action of the plan already wrote goes through
the shell (``editor`` would refuse to create it again).
"""

from __future__ import annotations

from typing import Sequence

from gripprobe_core.plugin import (
    MISSING_FILE, ChatRequest, ReferenceAction, ReferenceEdit, ReferenceRead, ReferenceWrite, ToolCall, ToolInfo, ToolsDialect,
    Turn, accepts_type, fill_required, known_content,
)

__all__ = ["ClineDialect", "add_file_patch"]

#: Cline's tool names and their parameters (as 3.0.65 sends them).
RUN_COMMANDS, COMMANDS = "run_commands", "commands"
EDITOR, EDITOR_PATH, OLD_TEXT, NEW_TEXT = "editor", "path", "old_text", "new_text"
READ_FILES, FILES = "read_files", "files"
APPLY_PATCH, PATCH_INPUT = "apply_patch", "input"


class ClineDialect(ToolsDialect):
    """Requests that offer Cline's ``run_commands`` (an array of commands) or its ``editor``."""

    name = "cline"

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return self.commands_tool(request) is not None or self.editor_tool(request) is not None

    # -------------------------------------------------------------------------- tool discovery

    @staticmethod
    def commands_tool(request: ChatRequest) -> ToolInfo | None:
        """``run_commands`` whose ``commands`` is an array."""
        tool = request.tool(RUN_COMMANDS)
        if tool is not None and accepts_type(tool.properties.get(COMMANDS), "array"):
            return tool
        return None

    @staticmethod
    def editor_tool(request: ChatRequest) -> ToolInfo | None:
        """``editor`` with ``path`` and ``new_text``."""
        tool = request.tool(EDITOR)
        if tool is not None and EDITOR_PATH in tool.properties and NEW_TEXT in tool.properties:
            return tool
        return None

    @staticmethod
    def read_files_tool(request: ChatRequest) -> ToolInfo | None:
        """``read_files`` whose ``files`` is an array."""
        tool = request.tool(READ_FILES)
        if tool is not None and accepts_type(tool.properties.get(FILES), "array"):
            return tool
        return None

    @staticmethod
    def patch_tool(request: ChatRequest) -> ToolInfo | None:
        """``apply_patch`` as a function tool taking ``input`` (a V4A patch)."""
        tool = request.tool(APPLY_PATCH)
        if tool is not None and PATCH_INPUT in tool.properties:
            return tool
        return None

    def shell_tool(self, request: ChatRequest) -> ToolInfo | None:
        return self.commands_tool(request) or super().shell_tool(request)

    def _shell_call(self, tool: ToolInfo, command: str) -> ToolCall:
        if tool.name == RUN_COMMANDS and accepts_type(tool.properties.get(COMMANDS), "array"):
            return ToolCall.of(tool.name, fill_required(tool, {COMMANDS: [command]}))
        return super()._shell_call(tool, command)

    # ------------------------------------------------------------------------------- speaking

    def say_in_plan(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn:
        action = actions[index]
        path = action.write.path if isinstance(action, ReferenceWrite) else \
            action.edit.path if isinstance(action, ReferenceEdit) else None
        known = known_content(actions, index, path) if path is not None else None
        return self._say(action, index, request, known=known)

    def _say(self, action: ReferenceAction, index: int, request: ChatRequest, known: str | None) -> Turn:
        call = self._cline_call(action, request, known)
        if call is not None:
            return Turn(tool_call=call, action_index=index)
        return self.say_with_functions(action, index, request)

    def _cline_call(self, action: ReferenceAction, request: ChatRequest, known: str | None) -> ToolCall | None:
        """The call in Cline's own tools, or None (then the generic dialect decides: the shell)."""
        if isinstance(action, ReferenceWrite):
            # ``known`` is what earlier actions of the plan wrote there: the file exists, and the editor
            # only creates missing files, so the shell overwrites it.
            if known is not None:
                return None
            editor = self.editor_tool(request)
            if editor is not None:
                return ToolCall.of(editor.name, fill_required(editor, {
                    EDITOR_PATH: action.write.path, NEW_TEXT: action.write.content}))
            patch = self.patch_tool(request)
            body = add_file_patch(action.write.path, action.write.content)
            if patch is not None and body is not None:
                return ToolCall.of(patch.name, fill_required(patch, {PATCH_INPUT: body}))
            return None
        if isinstance(action, ReferenceEdit):
            editor = self.editor_tool(request)
            if editor is not None and action.edit.old:
                return ToolCall.of(editor.name, fill_required(editor, {
                    EDITOR_PATH: action.edit.path, OLD_TEXT: action.edit.old, NEW_TEXT: action.edit.new}))
            return None
        if isinstance(action, ReferenceRead):
            tool = self.read_files_tool(request)
            if tool is not None:
                return ToolCall.of(tool.name, fill_required(tool, {FILES: [{"path": action.read.path}]}))
            return None
        return None

    def failing_edit(self, request: ChatRequest) -> ToolCall | None:
        editor = self.editor_tool(request)
        if editor is not None:
            return ToolCall.of(editor.name, fill_required(editor, {
                EDITOR_PATH: MISSING_FILE, OLD_TEXT: "missing", NEW_TEXT: "present"}))
        return super().failing_edit(request)


def add_file_patch(path: str, content: str) -> str | None:
    """A V4A ``*** Add File`` patch creating ``path`` with exactly ``content``; None when it cannot say
    it (an empty path or one with a newline).

    Cline's parser joins the ``+`` lines with newlines, so content ending in a newline needs a last empty
    ``+`` line."""
    if not path or "\n" in path or "\r" in path:
        return None
    body = "".join(f"+{line}\n" for line in content.split("\n"))
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch"

