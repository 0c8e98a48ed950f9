"""Finding and describing stored runs (``gripprobe list-runs``)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .layout import RunDir


def is_run_dir(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "cases").is_dir()


def iter_run_dirs(root: Path) -> Iterator[RunDir]:
    """Run directories under ``root``: a run directory itself, a ``runs/`` folder, or a results root
    holding ``runs/``. Sorted by RUN_ID (oldest first)."""
    root = Path(root)
    if is_run_dir(root) and not (root / "runs").is_dir():
        yield RunDir(root)
        return
    runs = root / "runs" if (root / "runs").is_dir() else root
    if not runs.is_dir():
        return
    for d in sorted(runs.iterdir()):
        if d.is_dir() and is_run_dir(d):
            yield RunDir(d)


@dataclass
class RunInfo:
    path: Path
    run_id: str
    status: str
    suite: str | None
    started_at: str | None
    agents: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    planned: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "run_id": self.run_id, "status": self.status, "suite": self.suite,
                "started_at": self.started_at, "agents": self.agents, "models": self.models,
                "planned": self.planned, "done": self.done, "counts": self.counts}


def describe_run(run: RunDir) -> RunInfo:
    """What ``list-runs`` shows. Counts come from the case.json files present (the truth after a kill),
    agents and models from the plan (or from the cases when the manifest is unreadable)."""
    manifest = run.read_manifest()
    planned = [p for p in manifest.get("planned") or [] if isinstance(p, dict)]
    counts: Counter[str] = Counter()
    agents, models = set(), set()
    if run.cases.is_dir():
        for d in run.cases.iterdir():
            try:
                data = json.loads((d / "case.json").read_bytes())
                counts[str(data["verdict"]["status"])] += 1
                agents.add(str(data["key"]["agent"]))
                models.add(str(data["key"]["model"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    for p in planned:
        agents.add(str(p.get("agent")))
        models.add(str(p.get("model")))
    status = str(manifest.get("status") or "unknown")
    if status == "running":
        status = "running or killed"
    return RunInfo(path=run.path, run_id=run.run_id, status=status, suite=manifest.get("suite"),
                   started_at=manifest.get("started_at"), agents=sorted(agents - {"None"}),
                   models=sorted(models - {"None"}), planned=len(planned), counts=dict(sorted(counts.items())))
