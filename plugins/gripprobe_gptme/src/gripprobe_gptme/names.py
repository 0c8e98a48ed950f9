"""gptme's tool names and the fence languages it runs, apart from :mod:`.parse`: registering the driver (and its
dialects) needs them, not the parser (whose patterns are compiled when a gptme phase is read)."""

from __future__ import annotations

from gripprobe_core.plugin import ToolNames

#: gptme's own tool names beside the common vocabulary (``shell``, ``patch``, ``read`` ... are generic).
TOOL_NAMES = ToolNames({
    "save": ("write", "write"), "append": ("write", "write"), "patch_many": ("edit", "write"),
    "ipython": ("ipython", "execute"), "tmux": ("tmux", "execute"),
})
#: Fence languages gptme 0.35.1 runs as tools (each tool's ``block_types``).
BLOCK_TOOLS = frozenset({
    "append", "autocommit", "autocompact", "browser", "chats", "choice", "clarify", "complete", "computer",
    "convert", "elicit", "form", "gh", "hashline_edit", "ipython", "py", "lessons", "mcp", "memory", "morph",
    "patch", "patch_many", "precommit", "progress", "rag", "read", "recall", "request_tool_change", "restart",
    "save", "screenshot", "shell", "subagent", "tmux", "todo", "vent", "vision", "watch",
})
