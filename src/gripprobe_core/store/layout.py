"""``results/runs/<RUN_ID>/`` layout and crash-safe writes.

Every file a reader relies on (case.json, manifest.json, events) is written to a temporary sibling
and renamed into place, so a kill never leaves a half-written file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models.results import CaseResult
from ..timeutil import run_id_stamp


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n")


def allocate_run_dir(results_root: Path) -> tuple[str, Path]:
    """Create ``runs/<RUN_ID>`` exclusively. RUN_ID is UTC ``YYYYMMDDTHHMMSSZ``; a start in the same
    second as another gets ``-2``, ``-3`` ... so parallel starts never share a directory."""
    runs = results_root / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    stem = run_id_stamp()
    for n in range(1, 10_000):
        run_id = stem if n == 1 else f"{stem}-{n}"
        path = runs / run_id
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return run_id, path
    raise RuntimeError("cannot allocate a run directory")  # pragma: no cover


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def cases(self) -> Path:
        return self.path / "cases"

    @property
    def reports(self) -> Path:
        return self.path / "reports"

    def case(self, case_id: str) -> Path:
        return self.cases / case_id

    def read_manifest(self) -> dict[str, Any]:
        """manifest.json as a dict; ``{}`` when it is missing or unreadable (a killed or foreign run)."""
        try:
            data = json.loads(self.manifest.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    def case_entries(self) -> list[tuple[str, CaseResult | None]]:
        """Every case directory with its result (None when case.json is missing or unreadable), sorted."""
        if not self.cases.is_dir():
            return []
        return [(d.name, read_case(d / "case.json")) for d in sorted(self.cases.iterdir()) if d.is_dir()]

    def case_results(self) -> list[CaseResult]:
        """Every readable case.json, sorted by case id (unreadable ones are skipped)."""
        return [res for _, res in self.case_entries() if res is not None]


def read_case(path: Path) -> CaseResult | None:
    try:
        return CaseResult.model_validate_json(path.read_bytes())
    except (OSError, ValueError):
        return None
