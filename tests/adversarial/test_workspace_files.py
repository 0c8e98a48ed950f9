"""Attacks 5, 6 and 7: what an agent can leave in its workspace for the harness to trip on — symlinks
out of it, FIFOs and device files, file names that are not text. One small run each (a hang or a
crash caused by one must not hide how the others are handled)."""

from __future__ import annotations

import json
import stat

import pytest

from .adversary import MODE, Arena, Case, RunResult, control_bytes, files_containing, walk
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e

RUN_TIMEOUT_S = 120
REBUILD_TIMEOUT_S = 60


def _run(arena: Arena, attack: str) -> RunResult | None:
    if arena.broken:
        return None
    return arena.run("run", "-a", f"adv_{attack}", "-m", "oracle-lazy", "-t", "hello", "--timeout", "20",
                     timeout=RUN_TIMEOUT_S)


@pytest.fixture(scope="module")
def symlink_run(arena):
    return _run(arena, "symlinks")


@pytest.fixture(scope="module")
def fifo_run(arena):
    return _run(arena, "fifos")


@pytest.fixture(scope="module")
def names_run(arena):
    return _run(arena, "names")


def _case(res: RunResult, attack: str) -> Case:
    assert not res.timed_out, f"`gripprobe run` did not finish: {res.explain()}"
    assert res.returncode == 0 and b"Traceback" not in res.stderr, res.explain()
    case = res.case(f"adv_{attack}")
    assert case.data is not None, f"{case.dir}: no case.json"
    assert case.status in STATUSES and case.status != "HARNESS_ERROR", \
        f"the agent's own workspace content is not the harness's error: {case.describe()}"
    assert case.reports(), f"the {attack} attack did not run: {case.describe()}"
    if MODE in ("bwrap", "none"):
        assert case.data.get("sandbox") == MODE
    return case


def _rebuild(arena: Arena, res: RunResult, recompute: bool) -> None:
    args = ["rebuild-reports", str(res.run_dir)] + (["--recompute"] if recompute else [])
    out = arena.cli(*args, timeout=REBUILD_TIMEOUT_S)
    assert not out.timed_out, f"`gripprobe {' '.join(args[:1] + args[2:])}` hangs: {out.explain()}"
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.explain()


def _listed(case: Case, names: list[str]) -> None:
    listing = case.listing()
    assert listing is not None, f"{case.dir}/artifacts/workspace.listing.json is missing"
    text = json.dumps(listing)
    missing = [n for n in names if n not in text]
    assert not missing, f"the workspace listing does not list {missing}"


def test_symlinks_are_never_followed(arena, symlink_run):
    """Attack 5: hello.txt → a file outside holding exactly the expected text, leak.txt → a canary
    file, directories → /, → the specs, → up the tree."""
    case = _case(symlink_run, "symlinks")
    assert {"hello.txt", "leak.txt", "rootdir"} <= set(case.reports()[-1]["made"])
    assert case.status not in ("PASS", "PASS_WITH_POLICY_VIOLATION"), case.describe()
    v = case.validator("file_equals")
    assert v is not None and not v["passed"], f"the validator read through the symlink: {v}"
    run_dir = symlink_run.run_dir
    links = [str(p.relative_to(run_dir)) for p, st in walk(run_dir) if stat.S_ISLNK(st.st_mode)]
    assert not links, f"symlinks in the results tree: {links}"
    needles = [arena.canaries["bait"].encode(), arena.canaries["spec"].encode()]
    assert not files_containing(run_dir, needles), "a symlink was followed into the run's files"
    _listed(case, ["hello.txt", "leak.txt", "rootdir", "specsdir"])
    _rebuild(arena, symlink_run, recompute=True)
    again = symlink_run.case("adv_symlinks")
    assert again.status not in ("PASS", "PASS_WITH_POLICY_VIOLATION"), f"after --recompute: {again.describe()}"
    v = again.validator("file_equals")
    assert v is not None and not v["passed"], f"after --recompute the validator read through the symlink: {v}"
    assert not files_containing(run_dir, needles), "rebuild-reports followed a symlink"


def test_fifos_and_devices_never_block(arena, fifo_run):
    """Attack 6: hello.txt is a FIFO nobody writes; more FIFOs, a socket file, device nodes where
    mknod is allowed (/dev/zero alike: endless)."""
    case = _case(fifo_run, "fifos")
    assert {"hello.txt", "pipe"} <= set(case.reports()[-1]["made"])
    run_dir = fifo_run.run_dir
    special = [str(p.relative_to(run_dir)) for p, st in walk(run_dir)
               if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode))]
    assert not special, f"FIFOs/devices/sockets recreated in the results tree: {special}"
    _listed(case, ["hello.txt", "pipe"])
    _rebuild(arena, fifo_run, recompute=False)
    _rebuild(arena, fifo_run, recompute=True)


def test_names_that_are_not_text(arena, names_run):
    """Attack 7: names with byte 0xFF, invalid UTF-8, ESC sequences, a newline, a tab, an RTL override,
    in files and a directory; the same bytes raw on stdout and stderr."""
    case = _case(names_run, "names")
    assert case.reports()[-1]["made"] >= 9
    run_dir = names_run.run_dir
    _rebuild(arena, names_run, recompute=False)
    _rebuild(arena, names_run, recompute=True)
    pages = sorted((run_dir / "reports").rglob("*.html"))
    assert pages, "no HTML report"
    for page in pages:
        data = page.read_bytes()
        data.decode("utf-8")  # strict: a page is text
        assert not control_bytes(data), f"{page.name}: raw control bytes {control_bytes(data)}"
    raw = (case.dir / "artifacts" / "workspace.listing.json").read_bytes()
    listing = json.loads(raw)  # strict UTF-8 JSON
    assert not control_bytes(raw)
    text = json.dumps(listing)
    missing = [n for n in ("bad", "red", "reversed", "tab", "inner", "hello.txt") if n not in text]
    assert not missing, f"the listing lost names: {missing}"
    out = arena.cli("list-runs", "--results", str(arena.results), timeout=60)
    assert out.returncode == 0 and not control_bytes(out.stdout + out.stderr), out.explain()
