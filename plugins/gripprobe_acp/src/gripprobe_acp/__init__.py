"""GripProbe as the client of ACP agents (Agent Client Protocol, JSON-RPC over the agent's stdin/stdout).

One session (:class:`~gripprobe_acp.session.AcpSession`, the core's ``AgentSession``) talks to every ACP agent
through the ``agent-client-protocol`` SDK: ``initialize`` without fs/terminal capabilities (the agent's own
tools act inside the sandbox), ``session/new`` in the workspace, the agent's permission mode, the prompt, and
every ``session/request_permission`` answered by the case's interaction policy. Every JSON-RPC message both ways
is recorded in the session transcript, which :mod:`gripprobe_acp.parse` turns into tier-B events.

The drivers (:mod:`gripprobe_acp.plugin`) differ only in what starts the agent and how it is configured:
``acp-qwen`` (Qwen Code ``--acp``), ``acp-opencode`` (``opencode acp``), ``acp-claude`` (Claude Code through
the ``claude-agent-acp`` adapter), ``acp-codex`` (codex through the ``codex-acp`` adapter) and ``acp`` (any ACP
agent named by its spec's executable and default_args, configured by nobody).
"""

__version__ = "0.2.0"

#: The SDK release the session was written and measured against (an exact pin in pyproject.toml).
SDK_VERSION = "0.12.1"

#: Driver names (``plugin:`` in a cli_agents spec).
GENERIC = "acp"
QWEN = "acp-qwen"
OPENCODE = "acp-opencode"
CLAUDE = "acp-claude"
CODEX = "acp-codex"

#: Qwen Code: native ACP (``qwen --acp``).
QWEN_PACKAGE, QWEN_VERSION, QWEN_EXECUTABLE = "@qwen-code/qwen-code", "0.24.4", "qwen"
#: opencode: native ACP (``opencode acp``).
OPENCODE_PACKAGE, OPENCODE_VERSION, OPENCODE_EXECUTABLE = "opencode-ai", "1.18.33", "opencode"
#: Claude Code through Zed's (now the ACP project's) adapter, which drives the pinned ``claude`` binary.
CLAUDE_ADAPTER_PACKAGE, CLAUDE_ADAPTER_VERSION, CLAUDE_ADAPTER_EXECUTABLE = (
    "@agentclientprotocol/claude-agent-acp", "0.101.0", "claude-agent-acp")
CLAUDE_PACKAGE, CLAUDE_VERSION, CLAUDE_EXECUTABLE = "@anthropic-ai/claude-code", "2.1.332", "claude"
#: codex through the ACP project's adapter (it runs ``codex app-server``), with the pinned ``codex``.
CODEX_ADAPTER_PACKAGE, CODEX_ADAPTER_VERSION, CODEX_ADAPTER_EXECUTABLE = (
    "@agentclientprotocol/codex-acp", "2.6.0", "codex-acp")
CODEX_PACKAGE, CODEX_VERSION, CODEX_EXECUTABLE = "@openai/codex", "0.169.0", "codex"
