"""``gripprobe doctor --model M``: is a model's backend ready for a run?

Four checks, each by the backend kind's own :class:`~gripprobe_core.drivers.Backend` object:

1. **reachable**: :meth:`Backend.probe` (one listing request, the preflight's; the embedded oracle is
   always there);
2. **served**: :meth:`Backend.list_models`, and is the spec's ``model_id`` among them;
3. **tool call**: :meth:`Backend.probe_tool_call`, one real request offering one tool: did a
   *structured* tool call come back (:mod:`.toolprobe`);
4. **model hash**: the digest the server lists for the model (Ollama), else the spec's ``model_hash``,
   else unknown; a server digest that differs from the spec's ``model_hash`` fails.

An unreachable backend stops that model's checks there. :func:`check_model` never raises for what a
server does; the caller renders :class:`ModelCheck` (the CLI's table or JSON) and picks the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from ..drivers import Backend, ListedModel, ToolCallProbe
from ..models.results import BackendProbe
from ..models.specs import BackendSpec, ModelSpec
from . import model_digest, server_root

__all__ = ["CHECKS", "ModelCheck", "check_model", "hashes_match"]

CHECKS = ("reachable", "served", "tool_call", "model_hash")

HashSource = Literal["server", "spec"]


def hashes_match(a: str, b: str) -> bool:
    """Do two digests name the same build? ``sha256:`` prefixes and case aside, equal, or one a prefix of
    the other of at least 12 hex digits (``ollama list`` shows 12)."""
    x, y = (h.strip().lower().removeprefix("sha256:") for h in (a, b))
    return x == y or (min(len(x), len(y)) >= 12 and (x.startswith(y) or y.startswith(x)))


@dataclass
class ModelCheck:
    """What ``gripprobe doctor --model`` found for one model's backend."""

    model: str
    """The model spec's id."""
    backend: BackendSpec
    embedded: bool
    url: str | None
    """The server root it was reached at (``--base-url`` or the spec's ``base_url``); None when embedded."""
    reachable: BackendProbe | None = None
    listed: list[ListedModel] | None = None
    listing_error: str | None = None
    tool_call: ToolCallProbe | None = None
    model_hash: str | None = None
    hash_source: HashSource | None = None
    server_digest: str | None = None
    notes: dict[str, str] = field(default_factory=dict)
    """Per check, what to do about it when it failed (filled by the caller, which knows the spec files)."""

    @property
    def is_reachable(self) -> bool:
        return self.reachable is not None and self.reachable.reachable

    @property
    def served(self) -> bool | None:
        """Is the spec's ``model_id`` among the models served? None when it could not be listed."""
        if self.listed is None:
            return None
        return model_digest(self.listed, self.backend.model_id)[0]

    @property
    def hash_mismatch(self) -> bool:
        return bool(self.server_digest and self.backend.model_hash
                    and not hashes_match(self.server_digest, self.backend.model_hash))

    def status(self, check: str) -> bool | None:
        """True (passed), False (failed) or None (not checked, or for the hash: unknown) for one of :data:`CHECKS`."""
        if check == "reachable":
            return self.is_reachable
        if not self.is_reachable:
            return None
        if check == "served":
            return bool(self.served)
        if check == "tool_call":
            return None if self.tool_call is None else self.tool_call.ok
        if check == "model_hash":
            return False if self.hash_mismatch else (True if self.model_hash else None)
        raise ValueError(f"unknown check {check!r}")

    @property
    def failed(self) -> list[str]:
        return [c for c in CHECKS if self.status(c) is False]

    @property
    def exit_code(self) -> int:
        """2: unreachable; 1: a check failed; 0: reachable, served, structured tool call (hash known or not)."""
        if not self.is_reachable:
            return 2
        return 1 if self.failed else 0

    def to_json(self) -> dict[str, Any]:
        listed = None if self.listed is None else [m.name for m in self.listed]
        return {
            "model": self.model, "backend_id": self.backend.id, "kind": self.backend.kind,
            "model_id": self.backend.model_id, "url": self.url, "embedded": self.embedded,
            "ok": self.exit_code == 0, "exit_code": self.exit_code,
            "checks": {
                "reachable": {"ok": self.status("reachable"),
                              **(self.reachable.model_dump(mode="json") if self.reachable else {})},
                "served": {"ok": self.status("served"), "model_id": self.backend.model_id, "models": listed,
                           "error": self.listing_error},
                "tool_call": {"ok": self.status("tool_call"),
                              **(self.tool_call.to_json() if self.tool_call else {})},
                "model_hash": {"ok": self.status("model_hash"), "value": self.model_hash, "source": self.hash_source,
                               "server_digest": self.server_digest, "spec_model_hash": self.backend.model_hash},
            },
            "fix": dict(self.notes),
        }


async def check_model(model: ModelSpec, backend: BackendSpec, kind: Backend, *, base_url: str | None,
                      env: Mapping[str, str], probe_timeout_s: float = 5.0,
                      tool_timeout_s: float = 120.0) -> ModelCheck:
    """Run the four checks on ``model`` through ``backend`` (a backend of its spec), stopping after the
    first when the backend does not answer."""
    embedded = not kind.remote
    url = None if embedded else server_root(base_url or backend.base_url or "")
    # what the backend is asked at: the server's root; the embedded replay's recording folder; nothing for the oracle
    at = url or (backend.recording if embedded and backend.recording else "")
    api_key = env.get(backend.api_key_env) if backend.api_key_env else None
    out = ModelCheck(model=model.id, backend=backend, embedded=embedded, url=url)
    out.reachable = await kind.probe(at, api_key=api_key, backend_id=backend.id, timeout_s=probe_timeout_s)
    if not out.reachable.reachable:
        return out
    try:
        out.listed = await kind.list_models(at, api_key=api_key, timeout_s=probe_timeout_s)
    except LookupError as exc:
        out.listing_error = str(exc)
    out.tool_call = await kind.probe_tool_call(at, model_id=backend.model_id, api_key=api_key,
                                               timeout_s=tool_timeout_s)
    if out.listed is not None:
        out.server_digest = model_digest(out.listed, backend.model_id)[1]
    if out.server_digest:
        out.model_hash, out.hash_source = out.server_digest, "server"
    elif backend.model_hash:
        out.model_hash, out.hash_source = backend.model_hash, "spec"
    return out
