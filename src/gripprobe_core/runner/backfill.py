"""``gripprobe backfill-model-hashes``: fill in model hashes of stored cases from the backend's model list.

Where the hash comes from:
each case's backend kind is asked for its model list (:meth:`gripprobe_core.drivers.Backend.list_models`):
- Ollama (``kind: ollama``, or an OpenAI-compatible server that also answers ``GET /api/tags``): the
  listed model's ``digest``.
- The embedded oracle backend: every profile, with the digest of the profile's name and the oracle's code
  (:mod:`gripprobe_core.oracle.fingerprint`). A run records it already (:func:`run_time_hash`), so a
  backfill finds it the same; it fills runs made before runs recorded it.
- An OpenAI-compatible server without ``/api/tags``: ``GET /v1/models`` has no hash field, so the
  model is reported as listed-without-hash and nothing is written.

A case whose recorded hash differs from the backend's is a conflict and is never overwritten
without ``force``. Writes are atomic (case.json is rewritten in place, nothing else is touched).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..models.results import CaseResult
from ..store.files import Stored
from ..store.layout import STORED_JSON_LIMIT, RunFolder, read_case

LOOKUP_TIMEOUT_S = 5.0


@dataclass
class BackfillRow:
    run_id: str
    case_id: str
    outcome: str  # filled | same | conflict | overwritten | unreachable | not_listed | no_hash | no_backend
    recorded: str | None = None
    found: str | None = None
    detail: str = ""


async def lookup_hash(backend: Any, url: str, model_id: str) -> tuple[str, str | None, str]:
    """Ask ``backend`` (a :class:`~gripprobe_core.drivers.Backend`) at ``url`` for ``model_id``'s hash:
    (outcome, hash, detail)."""
    from ..backends import model_digest

    try:
        listed = await backend.list_models(url, api_key=None, timeout_s=LOOKUP_TIMEOUT_S)
    except LookupError as exc:
        return "unreachable", None, str(exc)[:300]
    found, digest = model_digest(listed, model_id)
    if not found:
        return "not_listed", None, f"{model_id!r} is not in the backend's model list"
    if digest is None:
        return "no_hash", None, "the backend lists the model but carries no hash"
    return "found", digest, f"{backend.kind} model list"


async def run_time_hash(backend: Any, spec: Any) -> str | None:
    """The ``model_hash`` a case records when it starts: the spec's ``model_hash`` when it has one; else,
    for a backend that is not remote (the embedded oracle: nothing to reach), the digest its model list
    gives — the lookup backfill makes, so a backfill of a fresh run finds the same hash; else None (a
    remote server's hash is the spec's word or backfill's, never a request per case)."""
    if spec.model_hash:
        return str(spec.model_hash)
    if backend is None or backend.remote:
        return None
    outcome, digest, _ = await lookup_hash(backend, spec.base_url or "", spec.model_id)
    return digest if outcome == "found" else None


def _backend(case_dir: Stored) -> dict[str, Any] | None:
    try:
        data = json.loads((case_dir / "artifacts" / "case_inputs.json").read(STORED_JSON_LIMIT))
        backend = data["backend"]
        return backend if isinstance(backend, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def backfill_runs(runs: list[RunFolder], backends: Mapping[str, Any], *, force: bool = False,
                  base_url: str | None = None, dry_run: bool = False) -> list[BackfillRow]:
    """Backfill every case of ``runs``, asking each case's backend kind (``backends``, the registry's).
    One lookup per (backend kind, URL, model id)."""
    return asyncio.run(_backfill(runs, backends, force=force, base_url=base_url, dry_run=dry_run))


async def _backfill(runs: list[RunFolder], backends: Mapping[str, Any], *, force: bool, base_url: str | None,
                    dry_run: bool) -> list[BackfillRow]:
    cache: dict[tuple[str, str, str], tuple[str, str | None, str]] = {}
    rows: list[BackfillRow] = []
    for run in runs:
        for name in run.case_names():  # no link followed below the run folder
            case_dir = run.case(name)
            res = read_case(run.stored_case(name) / "case.json")
            if res is None:
                continue
            backend = _backend(run.stored_case(name))
            if backend is None:
                rows.append(BackfillRow(run.run_id, res.case_id, "no_backend", res.model_hash,
                                        detail="artifacts/case_inputs.json is missing or unreadable"))
                continue
            kind, model_id = str(backend.get("kind") or ""), str(backend.get("model_id") or "")
            url = base_url or backend.get("base_url") or ""
            key = (kind, url, model_id)
            if key not in cache:
                found = backends.get(kind)
                if found is None:
                    cache[key] = ("unreachable", None, f"backend kind {kind!r} is not installed (see `gripprobe plugins`)")
                elif found.remote and not url:
                    cache[key] = ("unreachable", None, "the backend has no base_url; pass --base-url")
                else:
                    cache[key] = await lookup_hash(found, url, model_id)
            rows.append(_apply(run, case_dir, res, cache[key], force=force, dry_run=dry_run))
    return rows


def _apply(run: RunFolder, case_dir: Path, res: CaseResult, found: tuple[str, str | None, str], *, force: bool,
           dry_run: bool) -> BackfillRow:
    outcome, digest, detail = found
    row = BackfillRow(run.run_id, res.case_id, outcome, res.model_hash, digest, detail)
    if outcome != "found" or digest is None:
        return row
    if res.model_hash == digest:
        row.outcome = "same"
        return row
    if res.model_hash and not force:
        row.outcome = "conflict"
        row.detail = "a different hash is recorded; --force overwrites it"
        return row
    row.outcome = "overwritten" if res.model_hash else "filled"
    if not dry_run:
        from ..integrity.seal import write_case_json  # re-signed when the run is this machine's and verifies

        write_case_json(case_dir, res.model_copy(update={"model_hash": digest}))
    return row
