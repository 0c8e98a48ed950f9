"""Default plugin: the built-in challenge server kinds ``nonce`` and ``search``.

The factories import their servers (and aiohttp's web framework) when a phase starts one, not when the
plugin registers: ``gripprobe validate`` and ``--help`` need no web server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .. import hookimpl

if TYPE_CHECKING:
    from ..challenges import ChallengeFactory, ChallengeServer


def make_nonce_challenge(options: dict[str, Any], phase: str) -> "ChallengeServer":
    """Kind ``nonce``: :func:`gripprobe_core.challenges.nonce.make_nonce_challenge`."""
    from ..challenges.nonce import make_nonce_challenge as make

    return make(options, phase)


def make_search_challenge(options: dict[str, Any], phase: str) -> "ChallengeServer":
    """Kind ``search``: :func:`gripprobe_core.challenges.search.make_search_challenge`."""
    from ..challenges.search import make_search_challenge as make

    return make(options, phase)


#: Kind → factory ``(options, phase) -> ChallengeServer``.
BUILTIN_CHALLENGES: "dict[str, ChallengeFactory]" = {
    "nonce": make_nonce_challenge,
    "search": make_search_challenge,
}


@hookimpl
def register_challenge_servers(register: "Callable[[str, ChallengeFactory], None]") -> None:
    for kind, factory in BUILTIN_CHALLENGES.items():
        register(kind, factory)
