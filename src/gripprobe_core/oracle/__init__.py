"""The oracle backend (SPEC §8): a deterministic model server driven by a test's reference solution.

Public API::

    oracle = OracleServer(actions, dialects=..., record_path=..., default_profile="perfect", format="tool")
    await oracle.start(); oracle.base_url; ...; await oracle.stop(); oracle.ground_truth

See docs/oracle.md for profiles, endpoints and dialect matching.
"""

from .dialects import Dialect, ToolsDialect, shell_command_for
from .plan import ChatRequest, Reply, ToolCall, ToolInfo, Turn, parse_chat_request
from .profiles import LazyProfile, PerfectProfile, Profile, ProfileContext, builtin_profiles
from .server import OracleServer

__all__ = [
    "ChatRequest", "Dialect", "LazyProfile", "OracleServer", "PerfectProfile", "Profile", "ProfileContext",
    "Reply", "ToolCall", "ToolInfo", "ToolsDialect", "Turn", "builtin_profiles", "parse_chat_request",
    "shell_command_for",
]
