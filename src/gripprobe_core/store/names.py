"""How long a name on disk may be: a path the user gives, a case folder the harness makes.

Linux file systems take at most ``NAME_MAX`` (255) bytes in one path component and the kernel at most
``PATH_MAX`` (4,096 bytes, the terminating NUL included) in a whole path. A longer name is refused where
it enters: a path option is one line and exit 2 (:func:`path_problem`); ids are short enough that a case
folder is at most 222 bytes (``CASE_ID_MAX``, models/ids.py) and a kept file's ``<phase>.<name>`` is checked
when kept (runner/evidence.py): never ``ENAMETOOLONG`` from deep inside a run.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..textsafe import safe_name

__all__ = ["CASE_ID_MAX", "NAME_MAX", "PATH_MAX", "check_path", "path_problem"]

NAME_MAX = 255
PATH_MAX = 4095
"""Bytes in a whole path (the kernel's 4,096 less the terminating NUL)."""
_TEMP_OVERHEAD = len(".") + len(".html") + len(".0123456789ab.tmp")
"""What the longest name made from a case id adds to it: a case page's atomic write,
``reports/cases/.<case_id>.html.<12 hex>.tmp``."""
CASE_ID_MAX = NAME_MAX - _TEMP_OVERHEAD
"""Bytes a case id (its folder's name) may have, so that every file named after it fits (232)."""


def _shown(component: bytes) -> str:
    text = safe_name(os.fsdecode(component))
    return text if len(text) <= 40 else text[:37] + "..."


def path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be used as a name on disk (a component over ``NAME_MAX`` bytes, the whole over
    ``PATH_MAX``), or None. Never touches the disk."""
    raw = os.fsencode(path)
    for component in raw.split(b"/"):
        if len(component) > NAME_MAX:
            return (f"its part {_shown(component)!r} is {len(component):,} bytes, over the {NAME_MAX}-byte limit of "
                    f"a file name; use a shorter name")
    whole = os.fsencode(os.path.abspath(os.fsdecode(raw))) if raw else raw
    if len(whole) > PATH_MAX:
        return f"it is {len(whole):,} bytes long, over the {PATH_MAX:,}-byte limit of a path; use a shorter path"
    return None


def check_path(path: Path, label: str) -> Path:
    """``path`` unchanged, or :class:`~gripprobe_core.errors.UserError` (``label: why; fix``)."""
    from ..errors import UserError

    problem = path_problem(path)
    if problem is not None:
        raise UserError(f"{safe_name(label)}: {problem}")
    return path
