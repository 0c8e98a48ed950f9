"""GripProbe agent plugin for opencode (npm ``opencode-ai``).

``plugin`` holds the driver (:class:`~gripprobe_opencode.plugin.OpencodeDriver`), ``config`` writes the
isolated opencode configuration, ``parse`` turns ``opencode run --format json`` output into normalized
events (with opencode's own tool names, :data:`~gripprobe_opencode.parse.TOOL_NAMES`).
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/opencode.yaml``).
NAME = "opencode"
#: The pinned npm release this plugin was measured against.
PINNED_VERSION = "1.18.33"
