"""What a case's interaction policy can be in codex 0.169.0: only a policy that denies none of its tools.

codex decides approvals with ``approval_policy`` (``on-request | never``, plus a granular table about
sandbox escalations; ``untrusted`` is refused by this version) and confines commands with ``sandbox_mode``
(``read-only | workspace-write | danger-full-access``). None of these denies a tool or a kind of tool:

- there is no per-tool or per-kind allow/deny list, and ``codex exec`` has nobody to answer an approval
  request;
- the only lever that refuses anything, the ``read-only`` sandbox, refuses writes and runs every shell
  command inside codex's own bubblewrap sandbox. Measured through ``gripprobe run`` (oracle-perfect,
  ``-c sandbox_mode="read-only"``): ``apply_patch`` is refused ("patch rejected: writing is blocked by
  read-only sandbox; rejected by user approval settings"), but every shell command fails too, for a
  reason that is no policy: codex's bubblewrap cannot nest in GripProbe's ("bwrap: Creating new namespace
  failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded", exit 1; unsandboxed it fails with
  "bwrap: execvp codex-linux-sandbox": codex will not create its helper under ``/tmp``, where the phase's
  HOME is). Where its sandbox did work, read-only commands would run. Neither is "deny writes" nor
  "deny execute";
- exec-policy rules (``prefix_rule(..., decision="forbidden")``) match command prefixes only.

So the driver keeps running codex as always (``approval_policy = "never"``, ``sandbox_mode =
"danger-full-access"``: GripProbe's sandbox is the sandbox) and says a policy that would deny one of its
tools is not applied; the evaluator then reports ``interaction_not_applied`` rather than a pass.
"""

from __future__ import annotations

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES

__all__ = ["NOT_APPLIED", "TOOLS", "support_for"]

#: The tools codex 0.169.0 offers the model (``codex exec``, a catalog model with the freeform apply_patch).
TOOL_IDS: tuple[str, ...] = ("exec_command", "write_stdin", "apply_patch", "view_image", "request_user_input")
TOOLS: tuple[ToolRef, ...] = tuple(ToolRef(t, *TOOL_NAMES.normalize(t)) for t in TOOL_IDS)

NOT_APPLIED = ("codex 0.169.0 cannot deny a tool by itself: it has no per-tool or per-kind approval setting "
               "(approval_policy is on-request or never), and its read-only sandbox, the one setting that refuses "
               "anything, blocks writes but also makes every shell command fail, because codex's bubblewrap cannot "
               "nest in GripProbe's sandbox, which is no policy; codex runs with its approvals off")


def support_for(spec: InteractionSpec | None) -> InteractionSupport:
    """Applied (natively: codex's approvals are off) when the policy allows every codex tool; else not."""
    if spec is None or spec.policy == "auto-approve":
        return InteractionSupport("native", True)
    static = static_policy(spec, TOOLS)
    denied = static.denied()
    if not denied and static.unapplied is None:
        return InteractionSupport("native", True)
    reasons = [f"{NOT_APPLIED}; the policy denies {', '.join(denied)}" if denied else NOT_APPLIED]
    if static.unapplied:
        reasons.append(static.unapplied)
    return InteractionSupport("none", False, "; ".join(reasons))
