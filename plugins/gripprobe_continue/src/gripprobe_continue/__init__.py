"""GripProbe agent plugin for Continue's CLI (npm ``@continuedev/cli``, command ``cn``).

``plugin`` holds the driver (:class:`~gripprobe_continue.plugin.ContinueDriver`), ``config`` writes the
isolated ``$CONTINUE_GLOBAL_DIR`` (config.yaml) and the environment, ``parse`` turns the session file,
the verbose log and stderr into normalized events.
"""

__version__ = "0.2.0"
