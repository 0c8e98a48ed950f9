"""Claude Code's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when a Claude Code phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: Claude Code's own tool names beside the common vocabulary (Bash, Write, Edit, Read, Glob, Grep,
#: WebFetch, WebSearch are already in it).
TOOL_NAMES = ToolNames({
    "Bash": ("shell", "execute"), "Write": ("write", "write"), "Edit": ("edit", "write"),
    "MultiEdit": ("edit", "write"), "NotebookEdit": ("notebook_edit", "write"), "Read": ("read", "read"),
    "Agent": ("agent", "other"), "Task": ("agent", "other"), "TodoWrite": ("todo", "other"),
    "ToolSearch": ("tool_search", "other"), "Skill": ("skill", "other"), "Workflow": ("workflow", "other"),
    "Monitor": ("monitor", "execute"), "BashOutput": ("shell_output", "execute"), "LS": ("list", "read"),
    "AskUserQuestion": ("ask_user", "other"), "EnterPlanMode": ("plan_mode", "other"),
    "ExitPlanMode": ("plan_mode", "other"),
})
