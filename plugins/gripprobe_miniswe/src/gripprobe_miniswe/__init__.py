"""GripProbe agent plugin for mini-swe-agent (PyPI ``mini-swe-agent``, command ``mini``).

``plugin`` holds the driver (:class:`~gripprobe_miniswe.plugin.MiniSweDriver`), ``config`` writes the phase's
environment and its one config file under HOME, ``parse`` turns mini's trajectory JSON into normalized
events, ``dialect`` teaches the oracle backend mini's two ways of being told to act (one ``bash`` function
tool, or one ```` ```mswea_bash_command ```` block in the reply text).
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/mini-swe-agent.yaml``).
NAME = "mini-swe-agent"
#: The pinned PyPI release this plugin was measured against.
PINNED_VERSION = "2.4.6"
#: PyPI distribution and the command it installs.
PYPI_PACKAGE = "mini-swe-agent"
EXECUTABLE = "mini"
#: The formats: ``tool`` (mini's default model class, one ``bash`` function tool) and ``markdown`` (its
#: text-based model class: one fenced ```` ```mswea_bash_command ```` block per reply, no tools offered).
FORMATS = ("markdown", "tool")
