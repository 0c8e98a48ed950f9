"""cn's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose patterns
are compiled when a continue phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import GENERIC_TOOL_NAMES, ToolNames

#: cn's tool names. Read, Write, Edit, List, Bash and Fetch are all common vocabulary (read, write, edit,
#: list, shell, fetch); MultiEdit (offered instead of Edit to models cn deems capable) is an edit;
#: Checklist, CheckBackgroundJob, AskQuestion, Exit and Skills keep their own names with kind ``other``.
TOOL_NAMES: ToolNames = GENERIC_TOOL_NAMES + ToolNames({"MultiEdit": ("edit", "write")})
