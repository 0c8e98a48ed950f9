"""Qwen Code's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when a Qwen Code phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: Qwen Code's own tool names beside the common vocabulary (which already knows ``run_shell_command``,
#: ``write_file``, ``edit``, ``read_file``, ``grep_search``, ``glob``, ``web_fetch``): ``notebook_edit``
#: edits, ``zoom_image`` reads, ``monitor`` runs a shell command in the background (Qwen Code counts it
#: among its shell tools). ``agent``, ``skill``, ``tool_search``, goal and cron tools keep their own name
#: with kind ``other``.
TOOL_NAMES = ToolNames({"notebook_edit": ("edit", "write"), "zoom_image": ("read", "read"),
                        "monitor": ("monitor", "execute")})
