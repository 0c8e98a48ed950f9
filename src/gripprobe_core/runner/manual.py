"""The ``manual`` interaction policy: the operator answers the agent's requests on the terminal.

One question at a time (cases running at once wait their turn), read from and written to the controlling
terminal (``/dev/tty``), never stdin or stdout, which may be redirected. A run whose cases use ``manual``
checks first that a terminal is there (:func:`terminal_problem`): without one it is exit 2 with one line,
never a hang. Manual answers are not reproducible, so those cases are excluded from scores.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import IO

from ..interaction import PermissionDecision, PermissionRequest, REJECT_KINDS, decide
from ..textsafe import safe_name

TTY = "/dev/tty"
SHOWN_INPUT_CHARS = 400
_lock: asyncio.Lock | None = None


def terminal_problem() -> str | None:
    """Why the operator cannot be asked (no controlling terminal, CI), or None."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return "CI is set: nobody is at a terminal to answer"
    try:
        with open(TTY, "r+b", buffering=0):
            return None
    except OSError as exc:
        return f"no terminal to ask on ({TTY}: {exc.strerror or exc})"


class TerminalResponder:
    """Asks the operator, one request at a time across the run."""

    async def decide(self, request: PermissionRequest) -> PermissionDecision:
        global _lock
        if _lock is None:
            _lock = asyncio.Lock()
        async with _lock:
            return await asyncio.to_thread(_ask, request)


class _Terminal:
    """The controlling terminal, read and written (a tty is not seekable: no ``r+`` text file over it)."""

    def __init__(self) -> None:
        self.out = open(TTY, "w", encoding="utf-8", errors="replace")
        try:
            self.inp = open(TTY, "r", encoding="utf-8", errors="replace")
        except OSError:
            self.out.close()
            raise

    def write(self, text: str) -> None:
        self.out.write(text)

    def flush(self) -> None:
        self.out.flush()

    def readline(self) -> str:
        return self.inp.readline()

    def close(self) -> None:
        self.inp.close()
        self.out.close()


def _ask(request: PermissionRequest) -> PermissionDecision:
    try:
        tty = _Terminal()
    except OSError:
        return PermissionDecision("deny", "manual (no terminal)", _reject(request))
    try:
        return _ask_on(tty, request)
    except OSError:
        return PermissionDecision("deny", "manual (terminal lost)", _reject(request))
    finally:
        tty.close()


def _ask_on(tty: "_Terminal | IO[str]", request: PermissionRequest) -> PermissionDecision:
    if request.is_question:
        tty.write(f"\nThe agent asks: {safe_name(request.prompt or '')}\nYour answer: ")
        tty.flush()
        return PermissionDecision("answer", "manual", answer=tty.readline().rstrip("\n"))
    shown = request.input if isinstance(request.input, str) else json.dumps(request.input, default=str)
    tty.write(f"\nThe agent asks to run {safe_name(request.raw_name or request.name or '?')} "
              f"({request.kind or 'other'}): {safe_name(shown[:SHOWN_INPUT_CHARS])}\n")
    for i, option in enumerate(request.options, 1):
        tty.write(f"  {i}. {safe_name(option.name or option.option_id)} [{option.kind or option.option_id}]\n")
    while True:
        tty.write("Allow? [y]es / [n]o" + (f" / option 1-{len(request.options)}" if request.options else "") + ": ")
        tty.flush()
        line = tty.readline()
        if not line:  # the terminal closed: deny
            return PermissionDecision("deny", "manual (terminal closed)", _reject(request))
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return _allow(request)
        if answer in ("n", "no"):
            return PermissionDecision("deny", "manual", _reject(request))
        if answer.isdigit() and 1 <= int(answer) <= len(request.options):
            option = request.options[int(answer) - 1]
            return PermissionDecision("deny" if option.kind in REJECT_KINDS else "allow", "manual", option.option_id)


def _allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision("allow", "manual", decide(None, request).option_id)


def _reject(request: PermissionRequest) -> str | None:
    return next((o.option_id for kind in REJECT_KINDS for o in request.options if o.kind == kind), None)
