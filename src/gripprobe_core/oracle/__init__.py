"""The oracle backend (SPEC §8): a deterministic model server driven by a test's reference solution.

Public API::

    oracle = OracleServer(actions, dialects=..., record_path=..., default_profile="perfect", format="tool")
    await oracle.start(); oracle.base_url; ...; await oracle.stop(); oracle.ground_truth

It speaks Chat Completions, the Responses API and Ollama's native API. See docs/oracle.md for
endpoints, profiles and dialect matching.

Names load on first use (a module ``__getattr__``): a plugin's dialect imports :mod:`.conversation` and
:mod:`.dialects` through this package without the server, its profiles or aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .dialects import Dialect, ToolsDialect, known_content, shell_command_for
    from .conversation import ChatRequest, Reply, TextCall, ToolCall, ToolInfo, Turn, parse_chat_request
    from .profiles import (
        EXPECTED_REFERENCE_STATUS, LazyProfile, PerfectProfile, Profile, ProfileContext, builtin_profiles,
    )
    from .responses_api import parse_responses_request
    from .server import OracleServer

__all__ = [
    "ChatRequest", "Dialect", "EXPECTED_REFERENCE_STATUS", "LazyProfile", "OracleServer", "PerfectProfile",
    "Profile", "ProfileContext", "Reply", "TextCall", "ToolCall", "ToolInfo", "ToolsDialect", "Turn",
    "builtin_profiles", "known_content", "parse_chat_request", "parse_responses_request", "shell_command_for",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".dialects": ("Dialect", "ToolsDialect", "known_content", "shell_command_for"),
    ".conversation": ("ChatRequest", "Reply", "TextCall", "ToolCall", "ToolInfo", "Turn", "parse_chat_request"),
    ".profiles": ("EXPECTED_REFERENCE_STATUS", "LazyProfile", "PerfectProfile", "Profile", "ProfileContext",
                  "builtin_profiles"),
    ".responses_api": ("parse_responses_request",),
    ".server": ("OracleServer",),
})
