"""opencode's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when an opencode phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: opencode's own tool names beside the common vocabulary (which already knows its ``bash``, ``edit``,
#: ``write``, ``read``, ``list``, ``glob``, ``grep``, ``webfetch``, ``websearch``, ``patch``): the
#: ``apply_patch`` it offers instead of edit/write for gpt-5 model names, and the ``multiedit`` of earlier
#: releases. ``task``, ``todowrite``, ``skill`` ... keep their own name with kind ``other``.
TOOL_NAMES = ToolNames({"apply_patch": ("edit", "write"), "multiedit": ("edit", "write")})
