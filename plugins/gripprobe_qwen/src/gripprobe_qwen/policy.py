"""A case's interaction policy as Qwen Code's own ``permissions.deny`` rules (measured on 0.24.4).

Qwen Code runs with ``--approval-mode yolo`` as always (every call approved, no prompt: headless Qwen Code
in ``default`` mode does not ask, it drops every tool that would need approval from the request), and a
policy that denies adds ``settings.json`` ``permissions.deny`` rules, which win over yolo (deny > ask >
allow). A rule is a tool name, optionally with a specifier: ``run_shell_command(*)`` (a command
pattern), ``write_file(//**)`` (a path glob; ``//`` = from the filesystem root).

How a denial is written matters, because a *whole-tool* rule (``write_file``) takes the tool out of the
request altogether (the model never sees it and uses another tool), while a rule with a specifier keeps
it offered and refuses **each call** ("This "write_file" invocation was denied by permission rules.
Matching deny rule: ..."), which the parser reports as a native permission request and denial tied to
the call. So:

- the shell tools and the file tools whose every call names a command or a path (``run_shell_command``,
  ``monitor``, ``read_file``, ``write_file``, ``edit``, ``notebook_edit``) get a specifier that matches every call
  (:data:`EVERY_CALL`);
- every other tool gets a whole-tool rule (not offered): their calls may carry no path (``glob`` and
  ``grep_search`` without ``path`` would slip past a path rule) or no specifier form exists (``web_fetch``
  matches domains without wildcards; ``agent``, ``skill`` ... match literal values).

Qwen Code's rules also cover families: a rule on ``read_file`` applies to every read tool (``glob``,
``grep_search``, ``zoom_image``, ``list_directory``), one on ``edit`` to ``write_file`` and
``notebook_edit``, one on ``run_shell_command`` to ``monitor``. A policy that denies the head of a family
but allows a member cannot be written and is reported as not applied. (Qwen Code also checks the files a
shell command writes against the write rules: with ``write_file`` denied, ``cat > f`` in the shell is
refused too, a native denial the parser reports like any other.)
"""

from __future__ import annotations

from typing import Literal, Mapping

from gripprobe_core.plugin import InteractionSpec, InteractionSupport, ToolRef, static_policy

from .names import TOOL_NAMES

__all__ = ["EVERY_CALL", "TOOLS", "deny_rules", "policy_deny_rules", "support_for"]

#: The tools Qwen Code 0.24.4 registers in a headless run (its ``init`` line; ``list_directory`` is named
#: for its rule family only).
TOOL_IDS: tuple[str, ...] = (
    "run_shell_command", "monitor", "read_file", "zoom_image", "glob", "grep_search", "write_file", "edit",
    "notebook_edit", "web_fetch", "agent", "list_agents", "send_message", "skill", "tool_search", "tool_call",
    "read_mcp_resource", "report_findings", "record_artifact", "enter_worktree", "exit_worktree", "cron_create",
    "cron_list", "cron_delete", "loop_wakeup", "get_goal", "update_goal", "task_stop",
)
TOOLS: tuple[ToolRef, ...] = tuple(ToolRef(t, *TOOL_NAMES.normalize(t)) for t in TOOL_IDS)

#: Rule specifiers that match every call of the tool (its required parameter is the command or a path).
EVERY_CALL: dict[str, str] = {"run_shell_command": "*", "monitor": "*", "read_file": "//**", "write_file": "//**",
                              "edit": "//**", "notebook_edit": "//**"}
#: The tools a rule on the key also governs (Qwen Code's rule families).
FAMILY: dict[str, tuple[str, ...]] = {
    "read_file": ("read_file", "zoom_image", "glob", "grep_search", "list_directory"),
    "edit": ("edit", "write_file", "notebook_edit"),
    "run_shell_command": ("run_shell_command", "monitor"),
}

Decision = Literal["allow", "deny"]


def deny_rules(decisions: Mapping[str, Decision]) -> tuple[list[str], str | None]:
    """``permissions.deny`` rules for per-tool decisions, and why they cannot be written (None when exact)."""
    rules: list[str] = []
    problems: list[str] = []
    for tool, decision in decisions.items():
        if decision != "deny":
            continue
        allowed = [t for t in FAMILY.get(tool, ()) if decisions.get(t) == "allow"]
        if allowed:
            problems.append(f"a Qwen Code rule on {tool} also governs {', '.join(allowed)}, which the policy allows")
            continue
        rules.append(f"{tool}({EVERY_CALL[tool]})" if tool in EVERY_CALL else tool)
    return rules, "; ".join(problems) or None


def _plan(spec: InteractionSpec | None) -> tuple[list[str], InteractionSupport]:
    if spec is None or spec.policy == "auto-approve":
        return [], InteractionSupport("native", True)
    static = static_policy(spec, TOOLS)
    if static.unapplied:
        return [], InteractionSupport("native", False, static.unapplied)
    rules, problem = deny_rules(static.decisions)
    if problem:
        return [], InteractionSupport("native", False, problem)
    return rules, InteractionSupport("native", True)


def support_for(spec: InteractionSpec | None) -> InteractionSupport:
    """How the driver meets ``spec``: natively, through ``permissions.deny`` (see the module docstring)."""
    return _plan(spec)[1]


def policy_deny_rules(spec: InteractionSpec | None) -> list[str]:
    """The ``permissions.deny`` rules that apply ``spec``; empty when there is no policy, it denies nothing,
    or it cannot be applied (then Qwen Code runs as without a policy)."""
    return _plan(spec)[0]
