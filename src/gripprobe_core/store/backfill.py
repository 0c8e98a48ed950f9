"""``gripprobe backfill-model-hashes``: fill in model hashes of stored cases from the backend's model list.

Where the hash comes from:
- Ollama (``kind: ollama``, or any backend that also answers ``GET /api/tags``): the listed model's
  ``digest``.
- The embedded oracle backend: it is started for the lookup (its ``/api/tags`` lists every profile
  with a digest of the profile's behaviour version).
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
from typing import Any

from ..models.results import CaseResult
from .layout import RunFolder, atomic_write_json, read_case

LOOKUP_TIMEOUT_S = 5.0


@dataclass
class BackfillRow:
    run_id: str
    case_id: str
    outcome: str  # filled | same | conflict | overwritten | unreachable | not_listed | no_hash | no_backend
    recorded: str | None = None
    found: str | None = None
    detail: str = ""


def _root(url: str) -> str:
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


async def _get_json(session: Any, url: str) -> Any:
    import aiohttp

    async with session.get(url, timeout=aiohttp.ClientTimeout(total=LOOKUP_TIMEOUT_S)) as resp:
        if resp.status != 200:
            raise LookupError(f"GET {url}: HTTP {resp.status}")
        return await resp.json(content_type=None)


def _match_tag(models: Any, model_id: str) -> tuple[bool, str | None]:
    """(listed, digest) for ``model_id`` in an ``/api/tags`` answer (``name`` or ``name:latest``)."""
    want = {model_id, model_id if ":" in model_id else f"{model_id}:latest"}
    for m in models.get("models", []) if isinstance(models, dict) else []:
        if isinstance(m, dict) and (m.get("name") in want or m.get("model") in want):
            digest = m.get("digest")
            return True, (f"sha256:{digest}" if isinstance(digest, str) and digest and ":" not in digest else digest)
    return False, None


async def lookup_hash(base_url: str, model_id: str) -> tuple[str, str | None, str]:
    """Ask the backend at ``base_url`` for ``model_id``'s hash: (outcome, hash, detail)."""
    import aiohttp

    root = _root(base_url)
    async with aiohttp.ClientSession() as session:
        errors = []
        try:
            listed, digest = _match_tag(await _get_json(session, f"{root}/api/tags"), model_id)
            if listed:
                return ("found", digest, "/api/tags") if digest else ("no_hash", None, "/api/tags lists no digest")
        except (aiohttp.ClientError, asyncio.TimeoutError, LookupError, ValueError, OSError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        try:
            data = await _get_json(session, f"{root}/v1/models")
            ids = {m.get("id") for m in data.get("data", []) if isinstance(m, dict)} if isinstance(data, dict) else set()
            if model_id in ids:
                return "no_hash", None, "/v1/models lists the model but carries no hash"
            return "not_listed", None, f"{model_id!r} is not in the backend's model list"
        except (aiohttp.ClientError, asyncio.TimeoutError, LookupError, ValueError, OSError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        return "unreachable", None, "; ".join(errors)[:300]


async def _oracle_hash(model_id: str) -> tuple[str, str | None, str]:
    from ..oracle.server import OracleServer

    server = OracleServer([])
    await server.start()
    try:
        return await lookup_hash(server.base_url, model_id)
    finally:
        await server.stop()


def _backend(case_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((case_dir / "artifacts" / "case_inputs.json").read_bytes())
        backend = data["backend"]
        return backend if isinstance(backend, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def backfill_runs(runs: list[RunFolder], *, force: bool = False, base_url: str | None = None,
                  dry_run: bool = False) -> list[BackfillRow]:
    """Backfill every case of ``runs``. One lookup per (backend URL, model id)."""
    return asyncio.run(_backfill(runs, force=force, base_url=base_url, dry_run=dry_run))


async def _backfill(runs: list[RunFolder], *, force: bool, base_url: str | None, dry_run: bool) -> list[BackfillRow]:
    cache: dict[tuple[str, str, str], tuple[str, str | None, str]] = {}
    rows: list[BackfillRow] = []
    for run in runs:
        if not run.cases.is_dir():
            continue
        for case_dir in sorted(d for d in run.cases.iterdir() if d.is_dir()):
            res = read_case(case_dir / "case.json")
            if res is None:
                continue
            backend = _backend(case_dir)
            if backend is None:
                rows.append(BackfillRow(run.run_id, res.case_id, "no_backend", res.model_hash,
                                        detail="artifacts/case_inputs.json is missing or unreadable"))
                continue
            kind, model_id = str(backend.get("kind") or ""), str(backend.get("model_id") or "")
            url = base_url or backend.get("base_url") or ""
            key = (kind if kind == "oracle" and not base_url else "", url, model_id)
            if key not in cache:
                if kind == "oracle" and not base_url:
                    cache[key] = await _oracle_hash(model_id)
                elif not url:
                    cache[key] = ("unreachable", None, "the backend has no base_url; pass --base-url")
                else:
                    cache[key] = await lookup_hash(url, model_id)
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
        atomic_write_json(case_dir / "case.json", res.model_copy(update={"model_hash": digest}).model_dump(mode="json"))
    return row
