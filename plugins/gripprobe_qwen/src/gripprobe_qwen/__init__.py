"""GripProbe agent plugin for Qwen Code (npm ``@qwen-code/qwen-code``, command ``qwen``).

``plugin`` holds the driver (:class:`~gripprobe_qwen.plugin.QwenDriver`), ``config`` writes the isolated
``~/.qwen/settings.json`` and the environment, ``parse`` turns ``qwen -o stream-json`` output and the chat
log into normalized events, ``dialect`` teaches the oracle Qwen Code's absolute file paths.
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/qwen-code.yaml``).
NAME = "qwen-code"
#: The pinned npm release this plugin was measured against.
PINNED_VERSION = "0.24.4"
#: npm package and the command it installs.
NPM_PACKAGE = "@qwen-code/qwen-code"
EXECUTABLE = "qwen"
