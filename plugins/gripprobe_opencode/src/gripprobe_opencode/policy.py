"""A case's interaction policy as opencode's own ``permission`` config (measured on opencode-ai 1.18.33).

opencode decides every tool call itself from ``permission`` in its config: one key per permission
(``bash``, ``edit``, ``read`` ...), each ``allow | ask | deny`` or, for most keys, an object of patterns
(``{"*": "deny", "git *": "allow"}``; the last pattern that matches the call wins). ``ask`` is never
written: ``opencode run`` has nobody to ask (``--auto`` would approve it). ``--auto`` keeps ``deny``
(measured: a denied call fails with its rule even under ``--auto``).

How a denial is written matters, because opencode *removes* a tool whose last rule is ``"*": deny``
from the request (the model never sees it; it then uses another tool, e.g. bash for a denied write):

- keys that take patterns get ``{"*": "deny", "/dev/null/*": "deny"}``: the last rule is no longer
  ``"*"`` (the second pattern is a path under a file, which no call can name), so the tool stays
  offered and **each call is refused** with opencode's ``PermissionDeniedError`` ("The user has
  specified a rule which prevents you from using this specific tool call ..."), which the parser
  reports as a native permission request and denial tied to the call;
- keys that take only an action (``webfetch``, ``todowrite``, ``websearch`` in this version) get
  ``"deny"``: opencode then does not offer the tool at all (no call, so no denial event).

One permission can cover several tools: ``edit`` governs ``edit``, ``write`` and ``apply_patch``. A
policy that decides those differently cannot be written, and is reported as not applied.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES
from .parse import permission_key

__all__ = ["DENY_EACH_CALL", "PATTERN_KEYS", "TOOLS", "permissions_for", "policy_permissions", "support_for"]

#: The tools ``opencode run`` offers the model (build agent, 1.18.33; ``apply_patch`` replaces ``edit``/``write``
#: for gpt-5 model names).
TOOL_IDS: tuple[str, ...] = ("bash", "read", "glob", "grep", "edit", "write", "apply_patch", "task", "skill",
                             "webfetch", "todowrite")
TOOLS: tuple[ToolRef, ...] = tuple(ToolRef(t, *TOOL_NAMES.normalize(t)) for t in TOOL_IDS)

#: Permission keys whose value may be an object of patterns (opencode's config schema, 1.18.33); the others
#: (``webfetch``, ``websearch``, ``todowrite``, ``question``, ``doom_loop``) take an action only.
PATTERN_KEYS: frozenset[str] = frozenset({"read", "edit", "glob", "grep", "list", "bash", "task", "external_directory",
                                          "lsp", "skill"})
#: The second pattern of a denial that keeps the tool offered (see the module docstring): a path under a
#: file, which no call names; it denies too, so nothing is allowed by it.
KEEP_OFFERED = "/dev/null/*"
DENY_EACH_CALL: dict[str, str] = {"*": "deny", KEEP_OFFERED: "deny"}

Decision = Literal["allow", "deny"]


def permissions_for(decisions: Mapping[str, Decision]) -> tuple[dict[str, Any], str | None]:
    """``permission`` entries for per-tool decisions, and why they cannot be written (None when exact)."""
    by_key: dict[str, dict[str, Decision]] = {}
    for tool, decision in decisions.items():
        by_key.setdefault(permission_key(tool), {})[tool] = decision
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, tools in by_key.items():
        if len(set(tools.values())) > 1:
            said = ", ".join(f"{t} {d}" for t, d in sorted(tools.items()))
            problems.append(f"opencode's permission {key!r} covers {', '.join(sorted(tools))} together; "
                            f"the policy decides them differently ({said})")
            continue
        decision = next(iter(tools.values()))
        if decision == "allow":
            out[key] = "allow"
        else:
            out[key] = dict(DENY_EACH_CALL) if key in PATTERN_KEYS else "deny"
    return out, "; ".join(problems) or None


def _plan(spec: InteractionSpec | None) -> tuple[dict[str, Any] | None, InteractionSupport]:
    if spec is None or spec.policy == "auto-approve":
        return None, InteractionSupport("native", True)
    static = static_policy(spec, TOOLS)
    if static.unapplied:
        return None, InteractionSupport("native", False, static.unapplied)
    permission, problem = permissions_for(static.decisions)
    if problem:
        return None, InteractionSupport("native", False, problem)
    return permission, InteractionSupport("native", True)


def support_for(spec: InteractionSpec | None) -> InteractionSupport:
    """How the driver meets ``spec``: natively, through the ``permission`` config (see the module docstring)."""
    return _plan(spec)[1]


def policy_permissions(spec: InteractionSpec | None) -> dict[str, Any] | None:
    """The ``permission`` entries that apply ``spec`` over the driver's defaults; None when there is no
    policy, it is ``auto-approve``, or it cannot be applied (then opencode runs as without a policy)."""
    return _plan(spec)[0]
