"""In-tree default plugin: registers the oracle's built-in ``tools`` dialect."""

from __future__ import annotations

from typing import Any, Callable

from gripprobe_core import hookimpl


@hookimpl
def register_oracle_dialects(register: Callable[[str, Any], None]) -> None:
    from gripprobe_core.oracle.dialects import ToolsDialect

    register("tools", ToolsDialect())
