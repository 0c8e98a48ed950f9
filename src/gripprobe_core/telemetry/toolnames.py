"""Tool name normalization: an agent's own tool name → ``(name, kind)`` for every tier.

Every parser (the proxy's tier A, an agent plugin's tier B, the marker parser's tier C, the self-report
parser's tier D) passes the raw name it saw through :func:`normalize`, so the same action gets the same
normalized name whatever agent performed it and whichever source saw it. ``kind`` is one of
:data:`gripprobe_core.models.specs.TOOL_KINDS` (read, write, execute, search, fetch, other).

The table covers the tools the supported agents really send (``/work/shared/agents/*`` tool arrays):
reference (shell, read, write, edit), gptme (save, append, patch, patch_many, shell, ipython, tmux,
complete, ...), codex (exec_command, write_stdin, apply_patch, view_image, web_search, ...), opencode
(bash, edit, write, read, glob, grep, webfetch, apply_patch, task, todowrite, skill, ...) and
continue-cli (Read, Write, Edit, List, Bash, Fetch, Checklist, ...). The full table is in
``docs/telemetry.md``.
"""

from __future__ import annotations

import re

__all__ = ["CANONICAL", "canonical_key", "normalize"]

_FAMILIES: dict[tuple[str, str], tuple[str, ...]] = {
    ("shell", "execute"): (
        "shell", "bash", "sh", "zsh", "exec", "exec_command", "execute", "execute_command", "execute_bash",
        "run", "run_command", "run_shell_command", "run_terminal_cmd", "run_terminal_command", "terminal",
        "local_shell", "shell_command", "command", "cmd", "powershell", "container_exec",
    ),
    ("write", "write"): (
        "write", "write_file", "write_to_file", "save", "save_file", "create", "create_file", "new_file",
        "file_write", "append", "append_file", "append_to_file", "put_file",
    ),
    ("edit", "write"): (
        "edit", "edit_file", "file_edit", "str_replace", "str_replace_editor", "str_replace_based_edit_tool",
        "replace", "replace_in_file", "search_replace", "search_and_replace", "patch", "patch_file",
        "patch_many", "apply_patch", "apply_diff", "multi_edit", "multiedit", "notebook_edit", "insert",
        "insert_text",
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
        "web_search", "websearch", "search_web", "web_search_preview", "google_search",
    ),
}

#: Known tools that keep their own (lowercased) name but have a meaningful kind.
_OWN_NAME_KINDS: dict[str, str] = {
    "ipython": "execute", "python": "execute", "tmux": "execute", "write_stdin": "execute",
    "view_image": "read",
}

#: canonical key → (normalized name, kind); see :func:`canonical_key`.
CANONICAL: dict[str, tuple[str, str]] = {
    key: family for family, keys in _FAMILIES.items() for key in keys
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NAMESPACE = re.compile(r"[./:]|__")


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


def normalize(raw_name: str | None) -> tuple[str, str]:
    """``(normalized name, kind)`` for a tool name as an agent called it. Never raises.

    Known tools map to a canonical family (``shell``/execute, ``write``/write, ``edit``/write,
    ``read``/read, ``list``/read, ``search``/search, ``fetch``/fetch, ``web_search``/search); any
    other name is kept (as its :func:`canonical_key`) with kind ``other`` (or a known kind, e.g.
    ``ipython``/execute). An empty or non-string name gives ``("", "other")``.
    """
    if not isinstance(raw_name, str):
        return "", "other"
    key = canonical_key(raw_name)
    if not key:
        return "", "other"
    if key in CANONICAL:
        return CANONICAL[key]
    return key, _OWN_NAME_KINDS.get(key, "other")
