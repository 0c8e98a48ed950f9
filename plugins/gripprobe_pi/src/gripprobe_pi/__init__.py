"""GripProbe agent plugin for the pi coding agent (npm ``@mariozechner/pi-coding-agent``, command ``pi``).

``plugin`` holds the driver (:class:`~gripprobe_pi.plugin.PiDriver`), ``config`` writes pi's isolated
agent folder (``models.json``, ``settings.json``) and environment, ``parse`` turns pi's session file
(and its ``--mode json`` event stream) into normalized events, ``dialect`` teaches the oracle pi's
``edit`` tool (a list of ``{oldText, newText}`` replacements).
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/pi.yaml``).
NAME = "pi"
#: The pinned npm release this plugin was measured against.
PINNED_VERSION = "0.73.1"
#: npm package and the command it installs.
NPM_PACKAGE = "@mariozechner/pi-coding-agent"
EXECUTABLE = "pi"
