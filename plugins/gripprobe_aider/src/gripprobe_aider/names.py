"""aider's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when an aider phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: aider's own name for what it does with a reply's edit blocks.
EDIT_TOOL = "edit"
#: aider's tool names: only :data:`EDIT_TOOL`, which the generic vocabulary already knows (edit/write).
TOOL_NAMES = ToolNames({EDIT_TOOL: ("edit", "write")})
