"""How the oracle says a reference action in an agent's own terms.

A :class:`Dialect` turns one reference action into one assistant :class:`~.conversation.Turn` for a
given request. The built-in :class:`ToolsDialect` reads the function tools the request offers and fills
a matching tool's parameters; it names no agent. Agent drivers bring their own dialects
(:meth:`gripprobe_core.drivers.AgentDriver.oracle_dialects`): text dialects for agents whose edits are
parsed from reply text (aider, gptme's markdown/xml), or a :class:`ToolsDialect` subclass for an agent
with a tool of its own (codex's freeform ``apply_patch``).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any, Protocol, Sequence, runtime_checkable

from ..models.specs import ReferenceAction, ReferenceEdit, ReferenceRead, ReferenceShell, ReferenceWrite
from .conversation import ChatRequest, ToolCall, ToolInfo, Turn, action_kind, describe_action


@runtime_checkable
class Dialect(Protocol):
    """An agent's way of being told to act.

    - ``accepts(request, format)``: does this dialect speak to this request? The oracle asks every
      registered dialect (sorted by name, ``tools`` last) and uses the first that accepts.
    - ``is_task_request(request)``: False for side requests (a title request without tools ...); those
      get a short plain-text answer and never advance the plan.
    - ``steps_taken(request)``: how many reference actions the conversation already performed.
    - ``say(action, index, request)``: the turn that performs ``action`` (``index`` in the plan), or a
      text turn explaining why it cannot.
    - ``finish(request, text)``: the closing turn once every action is done.

    Optional (profiles use them when present, see ``profiles.say_step`` and ``profiles.failing_turn``):

    - ``say_in_plan(actions, index, request)``: like ``say`` but knowing the whole plan (so an edit can
      be said against the file content earlier actions wrote).
    - ``failing_call(request)``: a tool call that is bound to fail (a command exiting non-zero), for
      the ``error-then-recover`` and ``retry-loop`` profiles; None when no tool can fail on purpose.
    - ``failing_turn(request)``: a whole turn bound to fail, for dialects whose actions are reply text
      (aider's edit blocks); preferred over ``failing_call`` when present. None when it cannot.
    - ``malformed_turn(actions, index, request)``: for text dialects, the turn of ``actions[index:]``
      with its first edit block broken (the ``malformed-args`` profile); None when it cannot.
    """

    def accepts(self, request: ChatRequest, format: str) -> bool: ...
    def is_task_request(self, request: ChatRequest) -> bool: ...
    def steps_taken(self, request: ChatRequest) -> int: ...
    def say(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn: ...
    def finish(self, request: ChatRequest, text: str) -> Turn: ...


def norm(name: str) -> str:
    """Lower-case a name and drop everything but letters and digits: ``file_path`` → ``filepath``."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


#: Tool names (compared via :func:`norm`) the generic dialect takes for a shell, write, edit or read tool
#: before looking at parameters; an agent's dialect extends them (``ToolsDialect.shell_names`` ...).
SHELL_NAMES = frozenset({"shell", "bash", "runcommand", "execute", "exec", "runshellcommand", "shellcommand",
                         "terminal", "runterminalcmd", "sh"})
WRITE_NAMES = frozenset({"write", "writefile", "savefile", "createfile", "writetofile"})
EDIT_NAMES = frozenset({"edit", "editfile", "strreplace", "replace", "patch", "replaceinfile"})
READ_NAMES = frozenset({"read", "readfile", "view", "cat", "viewfile", "openfile"})

MISSING_FILE = "gripprobe-missing-file.txt"
"""A path no test creates: reading it is the oracle's deliberately failing call."""

COMMAND_PARAMS = ("command", "cmd")
PATH_PARAMS = ("path", "filepath", "filename", "file", "targetfile")
CONTENT_PARAMS = ("content", "contents", "text", "filecontent")
OLD_PARAMS = ("oldstring", "oldstr", "old", "search", "oldtext")
NEW_PARAMS = ("newstring", "newstr", "new", "replace", "newtext", "replacement")


def find_param(tool: ToolInfo, candidates: tuple[str, ...]) -> str | None:
    """The tool's own spelling of the first candidate parameter it has (compared via :func:`norm`)."""
    by_norm = {norm(p): p for p in tool.properties}
    for cand in candidates:
        if cand in by_norm:
            return by_norm[cand]
    return None


def accepts_type(schema: Any, json_type: str) -> bool:
    """Does a property schema allow ``json_type`` (looks at type, anyOf/oneOf)?"""
    if not isinstance(schema, dict):
        return False
    t = schema.get("type")
    if t == json_type or (isinstance(t, list) and json_type in t):
        return True
    return any(accepts_type(s, json_type) for key in ("anyOf", "oneOf") for s in schema.get(key) or [])


def filler(name: str, schema: Any) -> Any:
    """A harmless value for a required parameter the dialect knows nothing about."""
    if isinstance(schema, dict):
        if "default" in schema:
            return schema["default"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
    if accepts_type(schema, "string") or not isinstance(schema, dict) or "type" not in schema:
        return "GripProbe reference step"
    if accepts_type(schema, "boolean"):
        return False
    if accepts_type(schema, "integer") or accepts_type(schema, "number"):
        if "timeout" in norm(name):
            return 60000 if "ms" in norm(name) else 60
        minimum = schema.get("minimum") if isinstance(schema, dict) else None
        return minimum if isinstance(minimum, (int, float)) else 1
    if accepts_type(schema, "array"):
        return []
    if accepts_type(schema, "object"):
        return {}
    return None


def fill_required(tool: ToolInfo, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` plus a filler for every required parameter still missing."""
    out = dict(args)
    for name in tool.required:
        if name not in out:
            out[name] = filler(name, tool.properties.get(name))
    return out


class ToolsDialect:
    """Maps actions onto whatever function tools the request offers (see docs/oracle.md).

    Tools are chosen by name first, then by parameters. When no tool of the needed kind exists,
    write/edit/read go through the shell tool; when nothing fits, the turn explains in text.
    """

    name = "tools"
    shell_names: frozenset[str] = SHELL_NAMES
    write_names: frozenset[str] = WRITE_NAMES
    edit_names: frozenset[str] = EDIT_NAMES
    read_names: frozenset[str] = READ_NAMES

    def accepts(self, request: ChatRequest, format: str) -> bool:
        return True

    def is_task_request(self, request: ChatRequest) -> bool:
        return request.has_tools

    def steps_taken(self, request: ChatRequest) -> int:
        return request.tool_call_turns()

    def finish(self, request: ChatRequest, text: str) -> Turn:
        return Turn(text=text)

    # -------------------------------------------------------------------------- tool discovery

    def shell_tool(self, request: ChatRequest) -> ToolInfo | None:
        named = [t for t in request.tools if norm(t.name) in self.shell_names and find_param(t, COMMAND_PARAMS)]
        if named:
            return named[0]
        named = [t for t in request.tools if norm(t.name) in self.shell_names and self._single_string_param(t)]
        if named:
            return named[0]
        by_param = [t for t in request.tools
                    if (p := find_param(t, COMMAND_PARAMS)) and accepts_type(t.properties.get(p), "string")]
        return by_param[0] if by_param else None

    def write_tool(self, request: ChatRequest) -> ToolInfo | None:
        def fits(t: ToolInfo) -> bool:
            return bool(find_param(t, PATH_PARAMS) and find_param(t, CONTENT_PARAMS)
                        and not find_param(t, OLD_PARAMS) and "append" not in norm(t.name))
        return self._pick(request, self.write_names, fits)

    def edit_tool(self, request: ChatRequest) -> ToolInfo | None:
        def fits(t: ToolInfo) -> bool:
            return bool(find_param(t, PATH_PARAMS) and find_param(t, OLD_PARAMS) and find_param(t, NEW_PARAMS))
        return self._pick(request, self.edit_names, fits)

    def read_tool(self, request: ChatRequest) -> ToolInfo | None:
        def fits(t: ToolInfo) -> bool:
            return bool(find_param(t, PATH_PARAMS))
        return self._pick(request, self.read_names, fits, by_params=False)

    @staticmethod
    def _pick(request: ChatRequest, names: frozenset[str], fits: Any, by_params: bool = True) -> ToolInfo | None:
        for t in request.tools:
            if norm(t.name) in names and fits(t):
                return t
        if by_params:
            for t in request.tools:
                if fits(t):
                    return t
        return None

    @staticmethod
    def _single_string_param(tool: ToolInfo) -> str | None:
        strings = [p for p in tool.required if accepts_type(tool.properties.get(p), "string")]
        return strings[0] if len(strings) == 1 else None

    # ------------------------------------------------------------------------------- speaking

    def say(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn:
        return self._say(action, index, request, known=None)

    def say_in_plan(self, actions: Sequence[ReferenceAction], index: int, request: ChatRequest) -> Turn:
        """:meth:`say` for ``actions[index]``, knowing what earlier actions wrote (see :func:`known_content`)."""
        action = actions[index]
        known = known_content(actions, index, action.edit.path) if isinstance(action, ReferenceEdit) else None
        return self._say(action, index, request, known=known)

    def _say(self, action: ReferenceAction, index: int, request: ChatRequest, known: str | None) -> Turn:
        """The turn for ``action``; ``known`` is the content of the file an edit changes, when earlier
        actions wrote it (None when unknown). A subclass with a tool of its own overrides this."""
        return self.say_with_functions(action, index, request)

    def failing_call(self, request: ChatRequest) -> ToolCall | None:
        """A call bound to fail: ``cat`` of a missing file through the shell, else reading or editing
        that missing file; None when the request offers none of these."""
        shell = self.shell_tool(request)
        if shell is not None:
            return self._shell_call(shell, f"cat {MISSING_FILE}")
        read = self.read_tool(request)
        if read is not None:
            return ToolCall.of(read.name, fill_required(read, {find_param(read, PATH_PARAMS): MISSING_FILE}))
        return self.failing_edit(request)

    def failing_edit(self, request: ChatRequest) -> ToolCall | None:
        """An edit of the missing file, bound to fail (the last resort of :meth:`failing_call`)."""
        edit = self.edit_tool(request)
        if edit is not None:
            return ToolCall.of(edit.name, fill_required(edit, {
                find_param(edit, PATH_PARAMS): MISSING_FILE, find_param(edit, OLD_PARAMS): "missing",
                find_param(edit, NEW_PARAMS): "present"}))
        return None

    def say_with_functions(self, action: ReferenceAction, index: int, request: ChatRequest) -> Turn:
        """:meth:`say` using function tools only (never a freeform patch)."""
        call = self._direct_call(action, request)
        if call is None:
            command = shell_command_for(action)
            shell = self.shell_tool(request)
            if shell is not None:
                call = self._shell_call(shell, command)
        if call is None:
            offered = ", ".join(t.name for t in request.tools) or "none"
            return Turn(text=(f"I cannot {describe_action(action)}: this request offers no "
                              f"{action_kind(action)} tool and no shell tool (tools offered: {offered})."))
        return Turn(tool_call=call, action_index=index)

    def _direct_call(self, action: ReferenceAction, request: ChatRequest) -> ToolCall | None:
        if isinstance(action, ReferenceShell):
            tool = self.shell_tool(request)
            return self._shell_call(tool, action.shell) if tool else None
        if isinstance(action, ReferenceWrite):
            tool = self.write_tool(request)
            if tool is None:
                return None
            return ToolCall.of(tool.name, fill_required(tool, {
                find_param(tool, PATH_PARAMS): action.write.path,
                find_param(tool, CONTENT_PARAMS): action.write.content}))
        if isinstance(action, ReferenceEdit):
            tool = self.edit_tool(request)
            if tool is None:
                return None
            return ToolCall.of(tool.name, fill_required(tool, {
                find_param(tool, PATH_PARAMS): action.edit.path,
                find_param(tool, OLD_PARAMS): action.edit.old,
                find_param(tool, NEW_PARAMS): action.edit.new}))
        if isinstance(action, ReferenceRead):
            tool = self.read_tool(request)
            if tool is None:
                return None
            return ToolCall.of(tool.name, fill_required(tool, {find_param(tool, PATH_PARAMS): action.read.path}))
        return None

    def _shell_call(self, tool: ToolInfo, command: str) -> ToolCall:
        param = find_param(tool, COMMAND_PARAMS) or self._single_string_param(tool) or "command"
        schema = tool.properties.get(param)
        value: Any = command
        if accepts_type(schema, "array") and not accepts_type(schema, "string"):
            value = ["bash", "-lc", command]
        return ToolCall.of(tool.name, fill_required(tool, {param: value}))


# ------------------------------------------------------------------------------ what a file holds

def known_content(actions: Sequence[ReferenceAction], index: int, path: str) -> str | None:
    """The content of ``path`` right before ``actions[index]``, when earlier actions wrote it: a write
    sets it, an edit of it is replayed, a shell command naming the file makes it unknown again.
    None when unknown (for example a file the workspace was seeded with)."""
    target = posixpath.normpath(path)
    content: str | None = None
    for action in actions[:index]:
        if isinstance(action, ReferenceWrite) and posixpath.normpath(action.write.path) == target:
            content = action.write.content
        elif isinstance(action, ReferenceEdit) and posixpath.normpath(action.edit.path) == target:
            e = action.edit
            content = content.replace(e.old, e.new, 1) if content is not None and e.old and content.count(e.old) == 1 \
                else None
        elif isinstance(action, ReferenceShell) and posixpath.basename(target) in action.shell:
            content = None
    return content


# ------------------------------------------------------------------------------- shell fallbacks

HEREDOC_TAG = "GRIPPROBE_EOF"


def shell_command_for(action: ReferenceAction) -> str:
    """A POSIX shell command (bash) that performs ``action`` exactly, for agents with only a shell."""
    if isinstance(action, ReferenceShell):
        return action.shell
    if isinstance(action, ReferenceWrite):
        path, content = action.write.path, action.write.content
        qpath = shlex.quote(path)
        mkdir = f"mkdir -p -- \"$(dirname -- {qpath})\" && " if "/" in path.strip("/") else ""
        if content.endswith("\n") and f"\n{HEREDOC_TAG}\n" not in f"\n{content}":
            return f"{mkdir}cat > {qpath} <<'{HEREDOC_TAG}'\n{content}{HEREDOC_TAG}"
        return f"{mkdir}printf '%s' {shlex.quote(content)} > {qpath}"
    if isinstance(action, ReferenceEdit):
        script = (
            "import pathlib, sys\n"
            f"p = pathlib.Path({action.edit.path!r})\n"
            f"old, new = {action.edit.old!r}, {action.edit.new!r}\n"
            "s = p.read_bytes().decode('utf-8')\n"
            "n = s.count(old)\n"
            "if n != 1:\n"
            "    sys.exit(f'edit: expected exactly one match, found {n}')\n"
            "p.write_bytes(s.replace(old, new, 1).encode('utf-8'))\n"
        )
        return f"python3 - <<'GRIPPROBE_PY'\n{script}GRIPPROBE_PY"
    if isinstance(action, ReferenceRead):
        return f"cat -- {shlex.quote(action.read.path)}"
    raise TypeError(f"not a reference action: {action!r}")
