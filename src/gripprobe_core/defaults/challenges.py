"""Default plugin: the built-in challenge server kinds ``nonce`` and ``search``."""

from __future__ import annotations

from typing import Callable

from .. import hookimpl
from ..challenges.nonce import make_nonce_challenge
from ..challenges.search import make_search_challenge
from ..challenges import ChallengeFactory

#: Kind → factory ``(options, phase) -> ChallengeServer``.
BUILTIN_CHALLENGES: dict[str, ChallengeFactory] = {
    "nonce": make_nonce_challenge,
    "search": make_search_challenge,
}


@hookimpl
def register_challenge_servers(register: Callable[[str, ChallengeFactory], None]) -> None:
    for kind, factory in BUILTIN_CHALLENGES.items():
        register(kind, factory)
