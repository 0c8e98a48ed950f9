"""The ``nonce`` challenge: prove a real fetch by echoing a per-phase nonce and payload.

``GET /challenge/<token>`` answers ``text/plain``::

    NONCE=<32 hex>
    PAYLOAD=<words-and-hex>

Every other path is 404. Facts: ``url`` (the full challenge URL), ``token``, ``nonce``, ``payload``
and ``proof`` (sha256 hex of ``"<nonce>:<payload>"``).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from aiohttp import web

from .http import ChallengeHTTPServer

__all__ = ["NonceChallenge", "nonce_proof", "make_nonce_challenge"]

_WORDS = ("amber", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper",
          "kelp", "lumen", "marble", "nectar", "onyx", "pollen", "quartz", "raven", "sierra", "tundra")


def nonce_proof(nonce: str, payload: str) -> str:
    """The proof the agent must compute: sha256 hex digest of ``"<nonce>:<payload>"``."""
    return hashlib.sha256(f"{nonce}:{payload}".encode("utf-8")).hexdigest()


class NonceChallenge(ChallengeHTTPServer):
    kind = "nonce"

    def __init__(self, options: dict[str, Any] | None = None, phase: str = "measured") -> None:
        super().__init__(options, phase)
        rng = secrets.SystemRandom()
        self.token = secrets.token_hex(8)
        self.nonce = secrets.token_hex(16)
        self.payload = f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{secrets.token_hex(4)}"
        self.facts = {"token": self.token, "nonce": self.nonce, "payload": self.payload,
                      "proof": nonce_proof(self.nonce, self.payload)}

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/challenge/{token}", self._challenge)

    def on_started(self) -> None:
        self.facts["url"] = f"{self.url}/challenge/{self.token}"

    async def _challenge(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            raise web.HTTPNotFound(text="unknown challenge\n")
        body = f"NONCE={self.nonce}\nPAYLOAD={self.payload}\n"
        return web.Response(text=body, content_type="text/plain")


def make_nonce_challenge(options: dict[str, Any], phase: str) -> NonceChallenge:
    """Challenge factory for kind ``nonce`` (no options)."""
    return NonceChallenge(options, phase)
