"""GripProbe agent plugin for gptme (PyPI ``gptme``).

``plugin`` holds the driver (:class:`~gripprobe_gptme.plugin.GptmeDriver`), ``config`` writes gptme's
isolated environment, ``parse`` turns gptme's ``conversation.jsonl`` (or its ``--output-format json`` stdout)
into normalized events, ``dialects`` teaches the oracle backend to speak gptme's three tool formats.
"""

__version__ = "0.2.0"

#: Agent plugin name (``plugin:`` in ``specs/cli_agents/gptme.yaml``).
NAME = "gptme"
#: The pinned PyPI release this plugin was measured against.
PINNED_VERSION = "0.35.1"
