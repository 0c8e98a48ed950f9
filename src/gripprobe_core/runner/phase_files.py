"""What a phase leaves for the judge: the names of its files next to the artifacts and its evidence record.

The phase side (runner/phase.py) writes these while its agent runs; the judge (runner/judge.py) reads them
after. They live apart from the judge so that starting a case's first agent does not load the judge (its
telemetry, usage and verdict code load while that agent runs: runner/run.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..models.results import BackendProbe, ProcessResult
from ..phase import PhaseContext

CASE_INPUTS = "case_inputs.json"


def phase_context_name(phase: str) -> str:
    return f"{phase}.context.json"


def proxy_record_name(phase: str) -> str:
    return f"proxy.{phase}.http.jsonl"


def stored_seen_at(value: Any) -> Path | None:
    """A stored context's ``seen_at``: the one path the harness shows (a stored run names nothing else)."""
    from ..phase import SEEN_ROOT

    if value is None:
        return None
    if value != str(SEEN_ROOT):
        raise ValueError(f"seen_at {str(value)[:80]!r} is not {SEEN_ROOT} (the only place the sandbox shows a phase's folder)")
    return SEEN_ROOT


def phase_context_record(ctx: PhaseContext, *, kept: list[str], harness_error: str | None = None,
                         sources: dict[str, str] | None = None, refused: list[dict[str, str]] | None = None,
                         interaction: Any = None) -> dict[str, Any]:
    """What ``<phase>.context.json`` holds (enough, with the artifacts, to rebuild ``ctx``): ``extra`` names
    the kept files, ``kept_from`` where each came from (``home/…``, ``workspace/…``, ``tmpdir/…``, or
    ``bytes``), ``kept_refused`` what the driver named that was not kept, and why; ``seen_at`` where the
    sandbox showed the phase's folder to the agent (:data:`~gripprobe_core.phase.SEEN_ROOT`, or None)."""
    return {
        "phase": ctx.phase, "prompt": ctx.prompt, "workspace": str(ctx.workspace), "home": str(ctx.home),
        "tmpdir": str(ctx.tmpdir), "base_url": ctx.base_url, "model_name": ctx.model_name,
        "timeout_s": ctx.timeout_s,
        "agent_executable": str(ctx.agent_executable) if ctx.agent_executable else None,
        "extra": sorted(kept), "kept_from": dict(sorted((sources or {}).items())),
        "kept_refused": list(refused or []), "harness_error": harness_error,
        "interaction": interaction.as_json() if interaction is not None else None,
        "seen_at": str(ctx.seen_at) if ctx.seen_at is not None else None,
    }


@dataclass(frozen=True)
class PhaseEvidence:
    """What one phase left behind, as the judge takes it: what a live phase just collected, or what a stored
    run holds (its case.json ``phases[]`` and ``<phase>.context.json``). Its files are in the case folder
    (:attr:`CaseEvidence.folder`): ``<phase>.stdout``/``.stderr``, ``artifacts/<phase>.<name>`` for each
    kept file, ``artifacts/proxy.<phase>.http.jsonl``, ``artifacts/oracle.<phase>.jsonl``."""

    ctx: PhaseContext
    """The phase as the agent saw it (prompt, paths, model name, format ...)."""
    process: ProcessResult
    kept: Sequence[str] = ()
    """The names of the files the driver had kept (``artifacts/<phase>.<name>``)."""
    proxy: Mapping[str, Any] = field(default_factory=dict)
    """What the phase's recording proxy reported (case.json ``phases[].proxy``)."""
    challenge: Mapping[str, Any] = field(default_factory=dict)
    """The phase's challenge facts (nonce, URL ...)."""
    probe: BackendProbe | None = None
    """The harness's own look at a remote backend right after the phase."""
    never_ran: str | None = None
    """Why the phase never ran (a forced proxy that was not available ...); None when it ran."""
    interaction: Mapping[str, Any] | None = None
    """How the driver met the case's interaction policy in this phase (``InteractionSupport.as_json()``)."""
