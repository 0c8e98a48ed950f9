"""The public API for plugin authors: everything a plugin may import from GripProbe, in one place.

A plugin imports from ``gripprobe_core.plugin`` (or the few names ``gripprobe_core`` re-exports) and
from nothing else of the core; a test fails when one of the in-tree plugins does. Its tests may also use
the kit, :mod:`gripprobe_core.testing` (pytest fixtures and a driver contract suite against the oracle).

An agent plugin registers a driver::

    from gripprobe_core.plugin import AgentCommand, BaseAgentDriver, Transcript, hookimpl

    class MyDriver(BaseAgentDriver):
        name = "myagent"                      # what a cli_agents spec puts in ``plugin:``

        def command(self, ctx):
            return AgentCommand([ctx.executable("my-agent"), "--prompt", ctx.prompt])

        def parse(self, ctx, capture):
            out = EventBuilder(ctx.phase, capture.stdout_path.name)
            ...                               # out.add(line, event_type=..., payload=...)
            return Transcript(out.events, final_text)

    @hookimpl
    def register_agents(register):
        register(MyDriver())

Groups below: hooks and drivers; what a phase is made of; specs, events and results; the agent's files
(read and found without following a link); parsing helpers;
oracle dialects (how the oracle speaks to an agent); validators, challenges, evaluators.

Every name loads on first use (a module ``__getattr__``): importing this module costs nothing, and a plugin
that imports a few names pulls in only the modules defining them, never the oracle's server or aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import hookimpl
from ._lazy import lazy_names

if TYPE_CHECKING:  # what a type checker sees; at run time each name loads on first use (below)
    # ------------------------------------------------------------------------------- hooks and drivers
    from .drivers import (
        EVERY_FORMAT, AgentDriver, Backend, BackendEndpoint, BackendPhase, BaseAgentDriver, ListedModel, Observability,
        ProxyHandle, ProxyStatus, ToolCallProbe,
    )
    # ---------------------------------------------------------------------------- what a phase is made of
    from .phase import (
        SESSION_TRANSCRIPT, AgentCommand, AgentSession, InstallRecipe, MarkerPattern, PhaseCapture, PhaseContext,
        RouteDecision, SessionChannel, SessionError, Transcript,
    )
    # ------------------------------------------------------------------- answering the agent (interaction)
    from .interaction import (
        InteractionSupport, PermissionDecision, PermissionOption, PermissionRequest, Responder, StaticPolicy, ToolRef,
        decide, permission_events, static_policy,
    )
    # ------------------------------------------------------------------------- specs, events and results
    from .errors import GripProbeError, UserError, WrapperParseError
    from .models.events import TIER_ORDER, Event
    from .models.results import BackendProbe, ProcessResult, SourcePointer, ValidatorResult, Verdict
    from .models.specs import (
        TOOL_KINDS, BackendSpec, CliAgentSpec, InteractionRule, InteractionSpec, ModelSpec, ReferenceAction, ReferenceEdit,
        ReferenceRead, ReferenceShell, ReferenceWrite, TestSpec,
    )
    # ------------------------------------------------------------- the agent's files (never through a link)
    from .agentfiles import find_agent_files, read_agent_file
    # ---------------------------------------------------------------------------------- parsing helpers
    from .jsonl import json_lines
    from .proxy.text_tools import TextToolCall, find_text_tool_calls, scan_text_tool_calls
    from .telemetry.attempts import detect_retry_loop, tool_attempts
    from .telemetry.builder import EventBuilder, mapping, number, text
    from .telemetry.toolnames import GENERIC as GENERIC_TOOL_NAMES, ToolNames, canonical_key
    from .timeutil import iso, utc_now_iso
    # ------------------------------------------------------------------------------------ oracle dialects
    from .oracle.conversation import (
        ChatRequest, TextCall, ToolCall, ToolInfo, Turn, action_kind, describe_action, message_text, parse_chat_request,
    )
    from .oracle.responses_api import parse_responses_request
    from .oracle.dialects import (
        COMMAND_PARAMS, MISSING_FILE, PATH_PARAMS, Dialect, ToolsDialect, accepts_type, fill_required, find_param,
        known_content, norm, shell_command_for,
    )
    # -------------------------------------------------------------------- validators, challenges, evaluators
    from .challenges import ChallengeFactory, ChallengeServer
    from .evaluator import EvaluationInputs, Evaluator
    from .validators.context import Validator, ValidatorContext, runs_code

#: Where each public name lives: module (relative to this package) → the names it gives (``alias=name`` when
#: the public name differs). Kept in the groups above; tests/test_public_api.py resolves every one.
_FROM: dict[str, tuple[str, ...]] = {
    # hooks and drivers
    ".drivers": ("EVERY_FORMAT", "AgentDriver", "Backend", "BackendEndpoint", "BackendPhase", "BaseAgentDriver",
                 "ListedModel", "Observability", "ProxyHandle", "ProxyStatus", "ToolCallProbe"),
    # what a phase is made of
    ".phase": ("SESSION_TRANSCRIPT", "AgentCommand", "AgentSession", "InstallRecipe", "MarkerPattern", "PhaseCapture",
               "PhaseContext", "RouteDecision", "SessionChannel", "SessionError", "Transcript"),
    # answering the agent (interaction)
    ".interaction": ("InteractionSupport", "PermissionDecision", "PermissionOption", "PermissionRequest", "Responder",
                     "StaticPolicy", "ToolRef", "decide", "permission_events", "static_policy"),
    # specs, events and results
    ".errors": ("GripProbeError", "UserError", "WrapperParseError"),
    ".models.events": ("TIER_ORDER", "Event"),
    ".models.results": ("BackendProbe", "ProcessResult", "SourcePointer", "ValidatorResult", "Verdict"),
    ".models.specs": ("TOOL_KINDS", "BackendSpec", "CliAgentSpec", "InteractionRule", "InteractionSpec", "ModelSpec",
                      "ReferenceAction", "ReferenceEdit", "ReferenceRead", "ReferenceShell", "ReferenceWrite", "TestSpec"),
    # the agent's files (never through a link)
    ".agentfiles": ("find_agent_files", "read_agent_file"),
    # parsing helpers
    ".jsonl": ("json_lines",),
    ".proxy.text_tools": ("TextToolCall", "find_text_tool_calls", "scan_text_tool_calls"),
    ".telemetry.attempts": ("detect_retry_loop", "tool_attempts"),
    ".telemetry.builder": ("EventBuilder", "mapping", "number", "text"),
    ".telemetry.toolnames": ("GENERIC_TOOL_NAMES=GENERIC", "ToolNames", "canonical_key"),
    ".timeutil": ("iso", "utc_now_iso"),
    # oracle dialects
    ".oracle.conversation": ("ChatRequest", "TextCall", "ToolCall", "ToolInfo", "Turn", "action_kind", "describe_action",
                             "message_text", "parse_chat_request"),
    ".oracle.responses_api": ("parse_responses_request",),
    ".oracle.dialects": ("COMMAND_PARAMS", "MISSING_FILE", "PATH_PARAMS", "Dialect", "ToolsDialect", "accepts_type",
                         "fill_required", "find_param", "known_content", "norm", "shell_command_for"),
    # validators, challenges, evaluators
    ".challenges": ("ChallengeFactory", "ChallengeServer"),
    ".evaluator": ("EvaluationInputs", "Evaluator"),
    ".validators.context": ("Validator", "ValidatorContext", "runs_code"),
}
__all__ = [
    "AgentSession", "InteractionRule", "InteractionSpec", "InteractionSupport", "PermissionDecision",
    "PermissionOption", "PermissionRequest", "Responder", "SESSION_TRANSCRIPT", "SessionChannel", "SessionError",
    "StaticPolicy", "ToolRef", "decide", "permission_events", "static_policy",
    "AgentCommand", "AgentDriver", "Backend", "BackendEndpoint", "BackendPhase", "BackendProbe", "BackendSpec",
    "BaseAgentDriver", "COMMAND_PARAMS", "ChallengeFactory", "ChallengeServer", "ChatRequest", "CliAgentSpec",
    "Dialect", "EVERY_FORMAT", "EvaluationInputs", "Evaluator", "Event", "EventBuilder", "GENERIC_TOOL_NAMES", "GripProbeError", "InstallRecipe",
    "ListedModel", "MISSING_FILE", "MarkerPattern", "ModelSpec", "Observability", "PATH_PARAMS", "PhaseCapture",
    "PhaseContext", "ProcessResult", "ProxyHandle", "ProxyStatus", "ReferenceAction", "ReferenceEdit",
    "ReferenceRead", "ReferenceShell", "ReferenceWrite", "RouteDecision", "SourcePointer", "TIER_ORDER",
    "TOOL_KINDS", "TestSpec", "TextCall", "TextToolCall", "ToolCall", "ToolCallProbe", "ToolInfo", "ToolNames",
    "ToolsDialect",
    "Transcript", "Turn", "UserError", "Validator", "ValidatorContext", "ValidatorResult", "Verdict",
    "WrapperParseError", "accepts_type", "action_kind", "canonical_key", "describe_action", "detect_retry_loop",
    "fill_required", "find_agent_files", "find_param", "find_text_tool_calls", "hookimpl", "iso", "json_lines", "known_content",
    "mapping", "message_text", "norm", "number", "parse_chat_request", "parse_responses_request",
    "read_agent_file", "runs_code", "scan_text_tool_calls", "shell_command_for", "text", "tool_attempts", "utc_now_iso",
]


__getattr__, __dir__ = lazy_names(__name__, globals(), _FROM, package=__package__)
