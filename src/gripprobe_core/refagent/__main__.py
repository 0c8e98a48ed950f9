"""``python -m gripprobe_core.refagent``: same as the ``gripprobe-refagent`` command."""

import sys

from .cli import main

sys.exit(main())
