"""Cline's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when a Cline phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: Cline's tool names beside the common vocabulary. ``editor`` creates a missing file or replaces text
#: in an existing one, ``apply_patch`` (offered instead of ``editor`` to gpt/codex model ids) does both
#: with a V4A patch: both are edits of kind write. ``submit_and_exit`` (yolo mode only) and the disabled
#: ``ask_question`` / team tools keep their own name with kind ``other``.
TOOL_NAMES = ToolNames({
    "run_commands": ("shell", "execute"),
    "editor": ("edit", "write"),
    "apply_patch": ("edit", "write"),
    "read_files": ("read", "read"),
    "search_codebase": ("search", "search"),
    "fetch_web_content": ("fetch", "fetch"),
})
