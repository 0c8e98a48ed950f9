"""GripProbe agent plugin for Continue's CLI (npm ``@continuedev/cli``, command ``cn``)."""

__version__ = "0.1.0"
