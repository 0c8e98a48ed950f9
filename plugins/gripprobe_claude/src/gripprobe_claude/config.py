"""Claude Code's isolated configuration for one phase: its environment, its options, its files under HOME.

Claude Code keeps everything under ``$HOME/.claude`` (sessions, settings, shell snapshots, plugin store)
and ``$HOME/.claude.json`` (its global state), and its scratch files (the messaging socket folder
``cc-socks``, task outputs ``claude-<uid>/``) under ``$TMPDIR``: with the phase's fresh HOME and TMPDIR
nothing of the machine's own Claude Code setup is read. Measured on @anthropic-ai/claude-code 2.1.332:

- **The wire.** ``ANTHROPIC_BASE_URL`` = the phase's server root (no ``/v1``): Claude Code posts to
  ``/v1/messages?beta=true``, always streamed (SSE). The key travels as ``ANTHROPIC_API_KEY`` (header
  ``x-api-key``); key-less backends get a dummy (Claude Code never asks for a login in print mode when
  a key is set).
- **Every model it could name is the phase's model**: the session model (``--model`` and
  ``ANTHROPIC_MODEL``), the family defaults an alias or a built-in agent resolves to (``fable``,
  ``opus``, ``sonnet``, ``haiku``), the small/fast model of background work, sub-agents, workflows and
  the auto-mode classifiers (:data:`MODEL_ENV`), so the recording proxy never sees another model name.
- **Nothing phones home** (:data:`QUIET_ENV`). Without these, one run makes five DNS lookups of
  api.anthropic.com (first-party telemetry batches, kept under ``~/.claude/telemetry`` when they fail) and a
  ``HEAD /api/hello`` to the base URL; with ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` alone,
  ``strace -f -e trace=connect`` shows exactly one connection, to the base URL, and no DNS lookup. The
  others switch off each part by its own name too (telemetry, error reporting, auto-update, feature
  flags, the signed model catalog, surveys, marketplace auto-install, IDE auto-connect).
- **Retries**: by default an HTTP 500 is retried 10 times with back-off (over two minutes);
  ``CLAUDE_CODE_MAX_RETRIES=1`` makes it 2 requests in about a second, then exit code 1.
- **Unattended**: print mode (``-p``) never prompts; a tool that needs permission is refused unless
  allowed. ``--permission-mode bypassPermissions`` is refused when running as root (unless
  ``IS_SANDBOX=1``, which also changes other behaviour), so the options allow the built-in tools by
  name (:data:`ALLOWED_TOOLS`) and ``--permission-mode dontAsk`` denies anything else without asking.
- **No MCP servers** (``--strict-mcp-config`` with none given: a workspace's ``.mcp.json`` is ignored),
  no IDE. ``~/.claude.json`` marks onboarding done.

The API key never lands in a file or on the command line. Claude Code hands its whole environment to
the commands its Bash tool runs (the key included); its only scrub switch
(``CLAUDE_CODE_SUBPROCESS_ENV_SCRUB``) insists on its own sandbox (socat, bubblewrap), so it is left off.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Claude Code's folder and global state file, under the phase's HOME.
CLAUDE_DIR = ".claude"
GLOBAL_STATE = ".claude.json"
#: Environment variable Claude Code reads the API key from (sent as ``x-api-key``).
API_KEY_ENV = "ANTHROPIC_API_KEY"
#: Key handed to key-less backends (the oracle, a local server): Claude Code needs one to start unattended.
DUMMY_API_KEY = "gripprobe-no-key"
#: Retries Claude Code may make on its own after a failed request.
MAX_RETRIES = 1

#: Variables naming a model Claude Code may use besides the session's: each is set to the phase's model.
MODEL_ENV: tuple[str, ...] = (
    "ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_MODEL",
    "ANTHROPIC_DEFAULT_FABLE_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL", "CLAUDE_CODE_WORKFLOW_SUBAGENT_MODEL",
    "CLAUDE_CODE_AUTO_MODE_MODEL", "CLAUDE_CODE_BG_CLASSIFIER_MODEL",
)

#: Everything that would phone home or wait for a person, switched off.
QUIET_ENV: dict[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",   # the umbrella: telemetry, reporting, updates, preconnect
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_GROWTHBOOK": "1",                        # feature-flag fetches
    "CLAUDE_CODE_DISABLE_FEATURE_FLAGS": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",              # OpenTelemetry export
    "CLAUDE_CODE_MODEL_CATALOG": "off",               # the signed model catalog document
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    "CLAUDE_CODE_AUTO_CONNECT_IDE": "false",
    "CLAUDE_CODE_IDE_SKIP_AUTO_INSTALL": "1",
    "DISABLE_INSTALLATION_CHECKS": "1",
}

#: Built-in tools allowed to run without asking (everything else is denied: ``--permission-mode dontAsk``).
ALLOWED_TOOLS: tuple[str, ...] = (
    "Bash", "Edit", "Write", "NotebookEdit", "Read", "Glob", "Grep", "WebFetch", "WebSearch", "Agent", "Skill",
)

#: The options after ``claude -p <prompt>``: JSON events on stdout (``--verbose`` is required with
#: stream-json in print mode), the tool permissions, no MCP servers.
PRINT_OPTIONS: tuple[str, ...] = (
    "--output-format", "stream-json", "--verbose",
    "--permission-mode", "dontAsk", "--allowedTools", ",".join(ALLOWED_TOOLS),
    "--strict-mcp-config",
)

#: ``~/.claude.json``: onboarding done, no IDE extension to install or IDE to connect. Claude Code rewrites
#: it with its own keys (machine and user ids, first start, migrations), dropping ``autoConnectIde`` (its
#: default). A legacy ``autoUpdates: false`` here would be migrated into a ``~/.claude/settings.json``; the
#: environment switches updates off instead.
GLOBAL_STATE_CONTENT: dict[str, object] = {
    "hasCompletedOnboarding": True,
    "autoConnectIde": False,
    "autoInstallIdeExtension": False,
}


def claude_dir(home: Path) -> Path:
    """The phase's ``~/.claude``."""
    return home / CLAUDE_DIR


def projects_dir(home: Path) -> Path:
    """Where Claude Code keeps session transcripts: ``~/.claude/projects/<cwd as a slug>/<session>.jsonl``."""
    return claude_dir(home) / "projects"


def write_config(home: Path) -> Path:
    """Write ``~/.claude.json`` and create ``~/.claude``; returns the folder."""
    folder = claude_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    (home / GLOBAL_STATE).write_text(json.dumps(GLOBAL_STATE_CONTENT, indent=2) + "\n", encoding="utf-8")
    return folder


def agent_env(api_key: str | None, base_url: str, model_name: str) -> dict[str, str]:
    """The variables Claude Code needs for one phase (HOME/TMPDIR/XDG are the runner's).

    ``base_url`` is the server root (Claude Code appends ``/v1/messages`` itself)."""
    env = dict(QUIET_ENV)
    env.update({name: model_name for name in MODEL_ENV})
    env.update({
        "ANTHROPIC_BASE_URL": base_url.rstrip("/"),
        API_KEY_ENV: api_key or DUMMY_API_KEY,
        "CLAUDE_CODE_MAX_RETRIES": str(MAX_RETRIES),
    })
    return env


def print_argv(executable: str, prompt: str, model_name: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """``claude -p … --model <m> [extra] -- <prompt>``: ``--`` keeps a prompt that starts with ``-`` a prompt."""
    return [executable, "-p", *PRINT_OPTIONS, "--model", model_name, *extra, "--", prompt]


# ------------------------------------------------------------------------ the control protocol (sessions)

#: Every built-in tool name of Claude Code 2.1.332 (the Agent SDK's list of built-in tool names, plus
#: ``Task``, the name the ``init`` line gives the Agent tool). Each gets an ``ask`` permission rule in a
#: session, so every call of any of them reaches the harness as a ``can_use_tool`` request: without
#: one, Claude Code's ``default`` mode runs reads (``Read``, read-only ``Bash`` such as ``cat``, ``pwd``)
#: and its own housekeeping tools (``ToolSearch`` …) without asking. A name the session does not have
#: costs nothing (measured: no warning, no error).
ASK_TOOLS: tuple[str, ...] = (
    "Agent", "Artifact", "AskUserQuestion", "Bash", "ClaudeDesign", "CronCreate", "CronDelete", "CronList", "Edit",
    "EndConversation", "EnterPlanMode", "EnterWorktree", "ExitPlanMode", "ExitWorktree", "Glob", "Grep",
    "ListAgents", "ListMcpResourcesTool", "LSP", "Monitor", "NotebookEdit", "OfferChromeSetup", "PowerShell",
    "Projects", "propose_skills", "ProposeGoal", "PushNotification", "Read", "ReadMcpResourceDirTool",
    "ReadMcpResourceTool", "ReadNotifications", "RemoteTrigger", "ReportFindings", "ScheduleWakeup",
    "SendFeedback", "SendMessage", "SendUserFile", "SendUserMessage", "ShareOnboardingGuide",
    "ShowOnboardingRolePicker", "Skill", "SubagentHandback", "Task", "TaskCreate", "TaskGet", "TaskList",
    "TaskStop", "TaskUpdate", "TodoWrite", "ToolSearch", "WaitForMcpServers", "WebFetch", "WebSearch", "Workflow",
    "Write",
)

#: ``--settings`` of a session: an ``ask`` rule for every tool (flag settings; a workspace's allow rules
#: cannot lift an ask rule).
SESSION_SETTINGS: dict[str, object] = {"permissions": {"ask": list(ASK_TOOLS)}}

#: The options of a session: the prompt arrives as a JSON line on stdin (``--input-format stream-json``),
#: events leave as JSON lines on stdout, and every permission question is a ``can_use_tool``
#: ``control_request`` on stdout answered by a ``control_response`` on stdin (``--permission-prompt-tool
#: stdio``, what the Claude Agent SDK passes); ``--permission-mode default`` asks rather than refuses. The
#: same ``--allowedTools`` as print mode keeps the same tools offered (``Glob`` and ``Grep`` are offered
#: only when allowed by name, measured); the ask rules win over it, so every call is still asked.
SESSION_OPTIONS: tuple[str, ...] = (
    "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
    "--permission-prompt-tool", "stdio", "--permission-mode", "default",
    "--allowedTools", ",".join(ALLOWED_TOOLS),
    "--settings", json.dumps(SESSION_SETTINGS, separators=(",", ":")),
    "--strict-mcp-config",
)


def session_argv(executable: str, model_name: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """``claude -p --input-format stream-json … --model <m> [extra]``: no prompt on the command line (the
    session writes it to stdin)."""
    return [executable, "-p", *SESSION_OPTIONS, "--model", model_name, *extra]
