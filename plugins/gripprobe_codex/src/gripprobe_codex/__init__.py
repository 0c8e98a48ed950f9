"""GripProbe agent plugin for OpenAI's codex CLI (npm ``@openai/codex``).

``plugin`` holds the driver (:class:`~gripprobe_codex.plugin.CodexDriver`), ``config`` writes the isolated ``$CODEX_HOME`` (config.toml
and the model catalog), ``parse`` turns ``codex exec --json`` output and the rollout transcript into
normalized events, ``dialect`` teaches the oracle its ``apply_patch``.
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/codex.yaml``).
NAME = "codex"
#: The pinned npm release this plugin was measured against.
PINNED_VERSION = "0.169.0"
#: npm package and the command it installs.
NPM_PACKAGE = "@openai/codex"
EXECUTABLE = "codex"
