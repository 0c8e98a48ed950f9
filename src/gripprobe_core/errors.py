"""Error taxonomy. A user error prints one line (where, what, how to fix) and exits 2."""

from __future__ import annotations


class GripProbeError(Exception):
    """Base class for errors GripProbe expects and explains."""


class UserError(GripProbeError):
    """Bad input from the user: one clear line, exit code 2."""

    exit_code = 2


class SpecError(UserError):
    """One or more spec files are invalid. ``errors`` holds ``file:line: key: message`` strings."""

    def __init__(self, errors: list[str]):
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


class PluginError(UserError):
    """A plugin could not be loaded or two plugins registered the same name."""


class WrapperParseError(GripProbeError):
    """A parser could not read an artifact it requires (→ HARNESS_ERROR / wrapper_parse_error)."""
