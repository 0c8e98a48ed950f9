"""GripProbe agent plugin for aider (PyPI ``aider-chat``).

``plugin`` holds the driver (:class:`~gripprobe_aider.plugin.AiderDriver`), ``config`` writes aider's
isolated per-phase files and builds its command line, ``parse`` reads its stdout and history files
(tier C), ``dialect`` teaches the oracle to answer in aider's text edit formats (whole / diff / udiff).
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/aider.yaml``).
NAME = "aider"
#: The pinned PyPI release this plugin was measured against.
PINNED_VERSION = "0.86.2"
#: PyPI distribution and installed command.
PYPI_PACKAGE = "aider-chat"
EXECUTABLE = "aider"
