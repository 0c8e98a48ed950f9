"""The embedded oracle backend (SPEC §8) as a :class:`~gripprobe_core.drivers.Backend`: started per phase
on 127.0.0.1 with the test's reference solution, the agents' dialects and the case's ground-truth record.

Its "model name" is a behaviour profile (``perfect``, ``lazy`` ...; docs/oracle.md); it lists every
profile as an Ollama-style model whose digest is a hash of the profile's behaviour version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..drivers import BackendPhase, ListedModel, ToolCallProbe
from ..models.results import BackendProbe
from ..timeutil import utc_now_iso


@dataclass
class OracleEndpoint:
    """A running oracle server for one phase."""

    server: Any  # oracle.server.OracleServer

    @property
    def base_url(self) -> str:
        return str(self.server.base_url)

    async def close(self) -> None:
        await self.server.stop()


class OracleBackend:
    kind = "oracle"
    description = "the embedded oracle: a deterministic model server that performs the test's reference solution"
    remote = False

    async def open(self, phase: BackendPhase) -> OracleEndpoint:
        from ..oracle.server import OracleServer  # imported here: only oracle runs need it

        server = OracleServer(list(phase.reference), dialects=phase.dialects, record_path=phase.record_path,
                              default_profile=phase.spec.model_id, format=phase.format, trial=phase.trial)
        await server.start()
        return OracleEndpoint(server)

    async def probe(self, url: str, *, api_key: str | None = None, backend_id: str = "",
                    timeout_s: float = 5.0) -> BackendProbe:
        """The runner starts the oracle itself: always there."""
        return BackendProbe(backend_id=backend_id, kind=self.kind, url=url or "(embedded)", reachable=True,
                            models=len(await self.list_models(url)), latency_ms=0.0, checked_at=utc_now_iso())

    async def list_models(self, url: str = "", *, api_key: str | None = None, timeout_s: float = 5.0
                          ) -> list[ListedModel]:
        from ..oracle.ollama_api import profile_digest
        from ..oracle.profiles import builtin_profiles

        return [ListedModel(name, f"sha256:{profile_digest(name)}") for name in sorted(builtin_profiles())]

    async def probe_tool_call(self, url: str = "", *, model_id: str, api_key: str | None = None,
                              timeout_s: float = 120.0) -> ToolCallProbe:
        """Start an oracle as a phase would (no reference solution: the probe prompt brings its own) and
        probe it through its OpenAI Chat Completions endpoint; stopped afterwards."""
        from ..oracle.profiles import builtin_profiles
        from ..oracle.server import OracleServer
        from .http import probe_served_by

        profile = model_id if model_id in builtin_profiles() else "perfect"
        return await probe_served_by(OracleServer([], default_profile=profile), model_id=model_id,
                                     timeout_s=timeout_s, endpoint="POST /v1/chat/completions of the embedded oracle")
