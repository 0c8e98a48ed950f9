"""codex's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when a codex phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: codex's own tool names beside the common vocabulary (what its requests offer: ``exec_command``,
#: ``write_stdin``, the freeform ``apply_patch``, ``view_image``, OpenAI's hosted ``web_search_preview`` ...).
TOOL_NAMES = ToolNames({
    "exec_command": ("shell", "execute"), "local_shell": ("shell", "execute"), "container_exec": ("shell", "execute"),
    "write_stdin": ("write_stdin", "execute"), "apply_patch": ("edit", "write"), "view_image": ("view_image", "read"),
    "web_search_preview": ("web_search", "search"),
})
