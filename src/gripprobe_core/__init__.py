"""GripProbe core: a benchmark harness for CLI coding agents.

The public API is what this module re-exports; everything else is internal.
"""

import pluggy

hookimpl = pluggy.HookimplMarker("gripprobe")

from .context import (  # noqa: E402
    AgentCommand, AgentInfo, EvaluationInputs, PhaseContext, PhaseOutputs, RouteDecision, ValidatorContext,
)
from .errors import GripProbeError, SpecError, UserError, WrapperParseError  # noqa: E402
from .models import *  # noqa: E402,F401,F403
from .models import __all__ as _model_names  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "hookimpl", "AgentCommand", "AgentInfo", "EvaluationInputs", "PhaseContext", "PhaseOutputs",
    "RouteDecision", "ValidatorContext", "GripProbeError", "SpecError", "UserError", "WrapperParseError",
    *_model_names,
]
