"""GripProbe agent plugin for Anthropic's Claude Code CLI (npm ``@anthropic-ai/claude-code``).

``plugin`` holds the driver (:class:`~gripprobe_claude.plugin.ClaudeCodeDriver`), ``config`` the phase's
environment, command-line options and the files written under its HOME, ``parse`` turns Claude Code's
``--output-format stream-json`` output and its session transcript into normalized events.
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/claude-code.yaml``).
NAME = "claude-code"
#: The pinned npm release this plugin was measured against.
PINNED_VERSION = "2.1.332"
#: npm package and the command it installs (a native binary its postinstall copies into place).
NPM_PACKAGE = "@anthropic-ai/claude-code"
EXECUTABLE = "claude"
