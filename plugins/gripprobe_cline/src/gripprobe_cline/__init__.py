"""GripProbe agent plugin for the Cline CLI (npm ``cline``).

``plugin`` holds the driver (:class:`~gripprobe_cline.plugin.ClineDriver`), ``config`` writes Cline's
isolated state under the phase's HOME (provider and global settings) and its environment, ``parse`` turns
its ``--json`` NDJSON and its session's message file into normalized events, ``dialect`` teaches the
oracle its tools (``run_commands``, ``editor``, ``read_files``, ``apply_patch``).
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/cline.yaml``).
NAME = "cline"
#: The pinned npm release this plugin was measured against.
PINNED_VERSION = "3.0.65"
#: npm package and the command it installs (a Node launcher that runs the platform's compiled binary,
#: npm ``@cline/cli-linux-x64`` on this machine).
NPM_PACKAGE = "cline"
EXECUTABLE = "cline"
