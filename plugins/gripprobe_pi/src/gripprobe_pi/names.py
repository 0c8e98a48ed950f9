"""pi's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose patterns
are compiled when a pi phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: pi's built-in tools (read, bash, edit, write are on by default; grep, find, ls are opt-in).
TOOL_NAMES = ToolNames({
    "bash": ("shell", "execute"), "read": ("read", "read"), "write": ("write", "write"), "edit": ("edit", "write"),
    "grep": ("search", "search"), "find": ("search", "search"), "ls": ("list", "read"),
})
