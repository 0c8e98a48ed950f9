"""mini-swe-agent's tool names, apart from :mod:`.parse`: registering the driver needs them, not the parser (whose
patterns are compiled when a mini phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

from .dialect import DEFAULT_FENCE

#: mini's one tool under its two names: the ``bash`` function tool, the text format's fence language.
TOOL_NAMES = ToolNames({"bash": ("shell", "execute"), DEFAULT_FENCE: ("shell", "execute")})
