"""Attack 17: scratch that resists removal. The agent leaves, in its HOME, TMPDIR and workspace, a
3,000-deep folder chain, chmod-000 folders, names that are not text, FIFOs and a socket, a fake API key
in HOME; the script it leaves for the command_output validator does the same in the validator's scratch
copy and HOME. A recursive removal raised RecursionError here: the case was HARNESS_ERROR, `gripprobe
run` exited 1 with a traceback, and the scratch folder, HOME included, stayed on disk.

The harness is what defends (its removal), so this holds unconfined too."""

from __future__ import annotations

import json
import shutil

import pytest

from .adversary import MODE, _agent, files_containing
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e

AGENT = "adv_deeptrees"
DEEP_TEST = """\
id: deep
title: Create hello.txt, leave check.py
prompt: Create hello.txt holding exactly "hello world" (one line).
requires: [write]
tags: [sanity]
validators:
  - kind: file_equals
    path: hello.txt
    expected: "hello world\\n"
  - kind: command_output
    command: [python3, check.py]
    expected: ok
    timeout_s: 60
reference:
  - write: {path: hello.txt, content: "hello world\\n"}
"""


def _leftovers(tmp) -> set[str]:
    return {p.name for p in tmp.iterdir() if p.name.startswith("gripprobe-")} if tmp.is_dir() else set()


@pytest.fixture(scope="module")
def deep_run(arena):
    if arena.broken:
        return None
    repo = arena.base / "repo-deep"
    shutil.copytree(arena.specs, repo / "specs", dirs_exist_ok=True)
    (repo / "results").mkdir(parents=True, exist_ok=True)
    (repo / "specs" / "cli_agents" / f"{AGENT}.yaml").write_text(_agent(AGENT, str(arena.build_agent("deeptrees")))
                                                                 .replace("timeout_s: 60", "timeout_s: 180"))
    (repo / "specs" / "tests" / "deep.yaml").write_text(DEEP_TEST)
    before = _leftovers(arena.tmp)
    res = arena.run("run", "-a", AGENT, "-m", "oracle-lazy", "-t", "deep", timeout=600, repo=repo)
    return res, before


def test_scratch_always_goes(arena, deep_run):
    """Classified (the validators ran and passed: not HARNESS_ERROR), exit 0 without a traceback, no
    warning, and no scratch folder of the case left — not the phases', not the validator's."""
    if deep_run is None:
        pytest.fail("arena broken")
    res, before = deep_run
    assert not res.timed_out, f"`gripprobe run` did not finish: {res.explain()}"
    assert res.returncode == 0 and b"Traceback" not in res.stderr + res.stdout, res.explain()
    case = res.case(AGENT, test="deep")
    assert case.data is not None, f"{case.dir}: no case.json"
    assert case.status in STATUSES and case.status != "HARNESS_ERROR", case.describe()
    assert case.data.get("harness_error") is None, case.data.get("harness_error")
    if MODE in ("bwrap", "none"):
        assert case.data.get("sandbox") == MODE
    made = {r["phase"]: r["made"] for r in [*case.reports("warmup"), *case.reports("measured")]}
    assert set(made) == {"warmup", "measured"}, made
    assert all(isinstance(n, int) and n >= 3000 for n in made["measured"].values()), f"the trees were not made: {made}"
    validators = {v["kind"]: v for v in case.data["validators"]}
    assert validators["command_output"]["passed"], f"check.py did not run (or not to the end): {validators}"
    assert validators["file_equals"]["passed"], validators
    assert case.data.get("warnings") == [], case.data.get("warnings")
    left = _leftovers(arena.tmp) - before
    assert not left, f"scratch folders left in the harness's TMPDIR: {sorted(left)}"
    assert not files_containing(arena.tmp, [b"sk-gpadv-fake-key"]), "an agent HOME (its key file) is still on disk"
    listing = json.loads((case.dir / "artifacts" / "workspace.listing.json").read_bytes())
    assert any(e.get("reason") in ("too_deep", "unreadable: Permission denied") for e in listing["entries"]), \
        "the workspace copy went 3,000 deep"
