"""Built-in challenge servers: small aiohttp apps on 127.0.0.1, one instance per phase.

Each instance draws fresh random tokens (:mod:`secrets`), so the warmup and measured phases see
different facts and an agent cannot pass the measured phase from memory. ``facts`` is complete once
:meth:`ChallengeHTTPServer.start` returned (it needs the bound port for URLs). ``requests`` logs
every request the server answered, as ``{ts, method, path, query, status}`` (``ts`` ISO-8601 UTC,
``query`` the raw query string), 404s included.

The kinds (``nonce``, ``search``) live in :mod:`.nonce` and :mod:`.search`, their shared lifecycle
(:class:`ChallengeHTTPServer`) in :mod:`.http`; :mod:`gripprobe_core.defaults.challenges` registers them.
This module holds only the protocol a plugin implements, so importing it (as the plugin API does)
pulls in no web framework; ``ChallengeHTTPServer`` loads (with aiohttp) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from .._lazy import lazy_names

if TYPE_CHECKING:
    from .http import ChallengeHTTPServer

__all__ = ["ChallengeFactory", "ChallengeHTTPServer", "ChallengeServer"]


class ChallengeServer(Protocol):
    """A per-phase challenge server (see :func:`gripprobe_core.hookspecs.register_challenge_servers`)."""

    url: str
    facts: dict[str, Any]
    requests: list[dict[str, Any]]

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


ChallengeFactory = Callable[[dict[str, Any], str], ChallengeServer]
"""``factory(options, phase) -> ChallengeServer`` (not started)."""


__getattr__, __dir__ = lazy_names(__name__, globals(), {".http": ("ChallengeHTTPServer",)})
