"""Finding and describing stored runs (``gripprobe list-runs``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .files import Stored
from .layout import RunFolder, read_case

#: What a manifest's ``status`` may say. Anything else on disk reads as ``invalid``.
RUN_STATUSES = ("running", "complete", "incomplete")
INVALID = "invalid"
"""The count key (and run status) of something on disk that is not a valid result."""


def manifest_status(manifest: dict[str, Any]) -> str:
    """A manifest's run status, validated: one of ``RUN_STATUSES``, ``unknown`` when it says none (a
    missing or unreadable manifest), ``invalid`` when it says something else."""
    status = manifest.get("status")
    if status is None:
        return "unknown"
    return status if isinstance(status, str) and status in RUN_STATUSES else INVALID


def _opt_str(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def manifest_selection(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """An ad-hoc run's ``selection`` (``gripprobe run -a/-m/-t/-f`` without a suite), checked: lists of
    strings under ``agents``, ``models``, ``tests``, ``formats``; ``backend`` and ``from_suite`` strings or
    None. None when the manifest records none (a suite run, or a run from before selections were recorded)."""
    sel = manifest.get("selection")
    if not isinstance(sel, dict):
        return None
    out: dict[str, Any] = {}
    for key in ("agents", "models", "tests", "formats"):
        v = sel.get(key)
        out[key] = [x for x in v if isinstance(x, str)] if isinstance(v, list) else []
    for key in ("backend", "from_suite"):
        out[key] = _opt_str(sel.get(key))
    return out


def is_run_dir(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "cases").is_dir()


def iter_run_dirs(root: Path) -> Iterator[RunFolder]:
    """Run directories under ``root``: a run directory itself, a ``runs/`` folder, or a results root
    holding ``runs/``. Sorted by RUN_ID (oldest first). Below the folder named (``root``, links and all),
    a link is never followed: a ``runs/`` or a run folder that is a link is no run."""
    root = Path(root)
    runs_link = (root / "runs").is_symlink()
    if is_run_dir(root) and not (root / "runs").is_dir():
        yield RunFolder(root)
        return
    if runs_link:
        return
    runs = root / "runs" if (root / "runs").is_dir() else root
    for name in Stored(runs).folders():
        if is_run_dir(runs / name):
            yield RunFolder(runs / name)


@dataclass
class StoredRun:
    path: Path
    run_id: str
    status: str
    suite: str | None
    started_at: str | None
    selection: dict[str, Any] | None = None
    """An ad-hoc run's selection (``suite`` is then None), see :func:`manifest_selection`."""
    agents: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    planned: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "run_id": self.run_id, "status": self.status, "suite": self.suite,
                "selection": self.selection, "started_at": self.started_at, "agents": self.agents,
                "models": self.models,
                "planned": self.planned, "done": self.done, "counts": self.counts}


def describe_run(run: RunFolder) -> StoredRun:
    """What ``list-runs`` shows. Counts come from the case.json files present (the truth after a kill),
    each validated as a whole: one that is not a valid result (an unknown status such as ``123``, a
    missing field, not JSON) counts as ``invalid``, never under the status it claims. Agents and
    models come from the plan (or from the cases when the manifest is unreadable)."""
    manifest = run.read_manifest()
    planned = [p for p in manifest.get("planned") or [] if isinstance(p, dict)]
    counts: Counter[str] = Counter()
    agents, models = set(), set()
    for name in run.case_names():  # no link followed below the run folder
        path = run.stored_case(name) / "case.json"
        if not path.lexists():
            continue  # not finished (or killed before it was)
        res = read_case(path)
        if res is None:
            counts[INVALID] += 1
            continue
        counts[res.verdict.status] += 1
        agents.add(res.key.agent)
        models.add(res.key.model)
    for p in planned:
        for key, into in (("agent", agents), ("model", models)):
            if isinstance(p.get(key), str):
                into.add(p[key])
    status = manifest_status(manifest)
    if status == "running":
        status = "running or killed"
    return StoredRun(path=run.path, run_id=run.run_id, status=status, suite=_opt_str(manifest.get("suite")),
                   selection=manifest_selection(manifest), started_at=_opt_str(manifest.get("started_at")), agents=sorted(agents), models=sorted(models),
                   planned=len(planned), counts=dict(sorted(counts.items())))
