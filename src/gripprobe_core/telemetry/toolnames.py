"""Tool name normalization: an agent's own tool name → ``(name, kind)`` for every tier.

Every parser (the proxy's tier A, an agent driver's tier B, the marker parser's tier C) passes the raw
name it saw through the case's :class:`ToolNames`, so the same action gets the same normalized name
whatever agent performed it and whichever source saw it. ``kind`` is one of
:data:`gripprobe_core.models.specs.TOOL_KINDS` (read, write, execute, search, fetch, other).

The core's own table (:data:`GENERIC`) holds only the common vocabulary of tool names (``shell``,
``read_file``, ``grep`` ...) and names no agent. Each agent driver adds the names its agent really sends
(``AgentDriver.tool_names``, e.g. codex's ``exec_command``, gptme's ``save``): its own entries win over
the generic ones. The tables of the five agents are in ``docs/telemetry.md``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Mapping

__all__ = ["GENERIC", "ToolNames", "canonical_arguments", "canonical_key"]

#: The common vocabulary: (normalized name, kind) → raw names (in key form, see :func:`canonical_key`).
_FAMILIES: dict[tuple[str, str], tuple[str, ...]] = {
    ("shell", "execute"): (
        "shell", "bash", "sh", "zsh", "exec", "execute", "execute_command", "execute_bash", "run", "run_command",
        "run_shell_command", "run_terminal_cmd", "run_terminal_command", "terminal", "shell_command", "command",
        "cmd", "powershell",
    ),
    ("write", "write"): (
        "write", "write_file", "write_to_file", "save_file", "create", "create_file", "new_file", "file_write",
        "append_file", "append_to_file", "put_file",
    ),
    ("edit", "write"): (
        "edit", "edit_file", "file_edit", "str_replace", "replace", "replace_in_file", "search_replace",
        "search_and_replace", "patch", "patch_file", "apply_diff", "insert", "insert_text",
    ),
    ("read", "read"): (
        "read", "read_file", "file_read", "read_many_files", "view", "view_file", "cat", "open_file",
        "get_file_contents", "read_text_file",
    ),
    ("list", "read"): (
        "ls", "list", "list_dir", "list_directory", "list_files",
    ),
    ("search", "search"): (
        "grep", "glob", "search", "find", "find_files", "file_search", "search_files", "grep_search",
        "codebase_search", "ripgrep", "rg",
    ),
    ("fetch", "fetch"): (
        "fetch", "webfetch", "web_fetch", "fetch_url", "url_fetch", "read_url", "open_url", "curl", "wget",
        "http_get", "http_request", "browse", "browser",
    ),
    ("web_search", "search"): (
        "web_search", "websearch", "search_web", "google_search",
    ),
}

#: Common names that keep their own name but have a meaningful kind.
_OWN_NAME_KINDS: dict[str, str] = {"python": "execute"}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAMESPACE = re.compile(r"[./:]|__")


@lru_cache(maxsize=4096)  # a pure function of the name, met again in every case a reader reads
def canonical_key(raw_name: str) -> str:
    """The lookup key of a raw tool name: last namespace segment, CamelCase → snake_case, lowercased.

    ``"functions.shell"`` → ``shell``; ``"mcp__fs__read_file"`` → ``read_file``; ``"WebFetch"`` →
    ``web_fetch``; ``"run-command"`` → ``run_command``.
    """
    name = raw_name.strip()
    parts = [p for p in _NAMESPACE.split(name) if p.strip()]
    if parts:
        name = parts[-1].strip()
    name = _CAMEL.sub("_", name).lower().replace("-", "_").replace(" ", "_")
    return re.sub(r"_+", "_", name).strip("_")


class ToolNames:
    """A tool-name table: the generic vocabulary plus an agent's own names.

    ``own`` maps raw names (any spelling: they are looked up by :func:`canonical_key`) to ``(name, kind)``;
    its entries win over the generic ones. Tables combine with ``+`` (the right side wins)::

        TOOL_NAMES = ToolNames({"exec_command": ("shell", "execute"), "view_image": ("view_image", "read")})
    """

    __slots__ = ("_table",)

    def __init__(self, own: Mapping[str, tuple[str, str]] | None = None, *, _base: Mapping[str, tuple[str, str]] | None = None):
        table = dict(_base if _base is not None else _GENERIC_TABLE)
        for raw, value in (own or {}).items():
            table[canonical_key(raw)] = (str(value[0]), str(value[1]))
        self._table: dict[str, tuple[str, str]] = table

    def __add__(self, other: "ToolNames") -> "ToolNames":
        return ToolNames(other._table, _base=self._table)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolNames) and other._table == self._table

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._table.items())))

    def entries(self) -> dict[str, tuple[str, str]]:
        """Every key → ``(name, kind)`` of this table (generic and own)."""
        return dict(self._table)

    def normalize(self, raw_name: str | None) -> tuple[str, str]:
        """``(normalized name, kind)`` for a tool name as an agent called it. Never raises.

        A known name maps to its family (``shell``/execute, ``write``/write, ``edit``/write,
        ``read``/read, ``list``/read, ``search``/search, ``fetch``/fetch, ``web_search``/search, or an
        agent's own entry); any other name is kept (as its :func:`canonical_key`) with kind ``other``.
        An empty or non-string name gives ``("", "other")``.
        """
        if not isinstance(raw_name, str):
            return "", "other"
        key = canonical_key(raw_name)
        if not key:
            return "", "other"
        found = self._table.get(key)
        if found is not None:
            return found
        return key, "other"


_GENERIC_TABLE: dict[str, tuple[str, str]] = {
    **{key: (key, kind) for key, kind in _OWN_NAME_KINDS.items()},
    **{key: family for family, keys in _FAMILIES.items() for key in keys},
}

#: The core's table: the common vocabulary only.
GENERIC = ToolNames()


def canonical_arguments(arguments: Any) -> str:
    """Arguments as canonical JSON text, so ``'{"a": 1}'`` and ``{"a": 1}`` compare equal.

    A string that parses as JSON is compared by its parsed value (the proxy sees arguments as the
    JSON text the model wrote, an agent's event stream often as an object). Never raises.
    """
    value = arguments
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return json.dumps(arguments, ensure_ascii=False)
    try:
        return _CANONICAL_JSON(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


# json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str), its encoder made once
# (json.dumps builds one on every call with options: a third of the time on a tool call's arguments)
_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode
