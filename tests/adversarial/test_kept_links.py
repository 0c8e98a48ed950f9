"""Attack 16: kept files through a symlinked folder. A real opencode, driven by its model, replaced its
log folder with a symlink to a host folder, and the harness copied a host file into the case's
artifacts. Here the agent does the same to every folder the harness keeps files from — a log folder and
an XDG folder in HOME, a folder in TMPDIR, one in the workspace, and (measured phase, where it can) its
whole TMPDIR and workspace — under the reference driver (which keeps the workspace) and under a
third-party driver, ``adv-keeper`` (keeper_plugin.py, installed into the arena), which keeps files from
all of them the way real drivers do (by pattern, by fixed path, and one read and redacted by the driver).

The host folder holds a canary at every path reachable through the links. The harness is what defends
(it walks from the phase's folders with no link followed), so this holds unconfined too."""

from __future__ import annotations

import json
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from .adversary import MODE, Arena, RunResult, _agent, files_containing, snapshot, walk
from gripprobe_core.models.results import STATUSES

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
KEEPER = "adv_keptlinks_keeper"
REFERENCE = "adv_keptlinks"
#: Where the keeper driver keeps files from, below the links the attack plants (host folder layout).
HOST_FILES = ("logs/session-0.jsonl", "logs/session-1.jsonl", "logs/secret.log", "local/state/adv/state.json",
              "tmp/run.log", "ws/notes.txt", "tmpwhole/adv/run.log", "wswhole/.adv/notes.txt", "wswhole/leak.txt")


@dataclass
class PluginArena(Arena):
    """The session's arena, with extra plugin folders on the harness's PYTHONPATH."""

    pythonpath: tuple[str, ...] = ()

    def env(self) -> dict[str, str]:
        env = super().env()
        env["PYTHONPATH"] = ":".join([*self.pythonpath, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
        return env


def install_keeper(base: Path) -> Path:
    """keeper_plugin.py as an installed distribution (a dist-info with its entry point), in ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "keeper_plugin.py", base / "gripprobe_adv_keeper.py")
    info = base / "gripprobe_adv_keeper-0.0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gripprobe-adv-keeper\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text("[gripprobe]\nadv_keeper = gripprobe_adv_keeper\n")
    (info / "top_level.txt").write_text("gripprobe_adv_keeper\n")
    return base


@pytest.fixture(scope="module")
def links(arena):
    """The run of both agents; the host folder's canary and its snapshot before the run."""
    if arena.broken:
        return None
    canary = f"gpcanary-linkhost-{secrets.token_hex(8)}"
    host = arena.base / "linkhost"
    for rel in HOST_FILES:
        (host / rel).parent.mkdir(parents=True, exist_ok=True)
        body = "hello world\n" if rel.endswith("hello.txt") else f'{{"canary": "{canary}", "key": "sk-{canary}"}}\n'
        (host / rel).write_text(body)
    (host / "wswhole" / "hello.txt").write_text("hello world\n")  # the validator's answer, if followed
    repo = arena.base / "repo-links"
    shutil.copytree(arena.specs, repo / "specs", dirs_exist_ok=True)
    (repo / "results").mkdir(parents=True, exist_ok=True)
    exe = arena.build_agent("keptlinks")
    (repo / "specs" / "cli_agents" / f"{REFERENCE}.yaml").write_text(_agent(REFERENCE, str(exe)))
    (repo / "specs" / "cli_agents" / f"{KEEPER}.yaml").write_text(
        _agent(KEEPER, str(exe)).replace("plugin: reference", "plugin: adv-keeper"))
    with_keeper = PluginArena(base=arena.base, marker=arena.marker, canaries=arena.canaries,
                              pythonpath=(str(install_keeper(arena.base / "adv-plugins")),))
    before = snapshot(host)
    res = with_keeper.run("run", "-a", REFERENCE, "-a", KEEPER, "-m", "oracle-lazy", "-t", "hello", "-j", "2",
                          "--timeout", "30", timeout=180, repo=repo)
    return {"res": res, "canary": canary, "host": host, "before": before, "arena": with_keeper}


def _case(res: RunResult, agent: str):
    assert not res.timed_out, f"`gripprobe run` did not finish: {res.explain()}"
    assert res.returncode == 0 and b"Traceback" not in res.stderr, res.explain()
    case = res.case(agent)
    assert case.data is not None, f"{case.dir}: no case.json"
    assert case.status in STATUSES and case.status != "HARNESS_ERROR", case.describe()
    reports = case.reports()
    assert reports, f"the keptlinks attack did not run: {case.describe()}"
    made = reports[-1]["made"]
    planted = {"home/.adv-agent/logs", "home/.local", "tmpdir/adv", "workspace/.adv"}
    assert planted <= set(made), f"the attack could not plant its links: {made}"
    if MODE in ("bwrap", "none"):
        assert case.data.get("sandbox") == MODE
    return case


def _nothing_leaked(links) -> None:
    res = links["res"]
    hits = files_containing(res.run_dir, [links["canary"].encode()])
    assert not hits, f"a host file was kept through a symlinked folder: {hits}"
    assert snapshot(links["host"]) == links["before"], "something was written into the host folder through a link"
    in_results = [str(p.relative_to(res.run_dir)) for p, st in walk(res.run_dir) if stat.S_ISLNK(st.st_mode)]
    assert not in_results, f"symlinks in the results tree: {in_results}"


def test_kept_files_never_come_through_a_symlinked_folder(links):
    """The third-party driver names files under every linked folder: none is kept, each refusal is listed
    with its reason and where it stopped, and the case says so in its warnings."""
    if links is None:
        pytest.fail("arena broken")
    case = _case(links["res"], KEEPER)
    _nothing_leaked(links)
    for phase in ("warmup", "measured"):
        record = json.loads((case.dir / "artifacts" / f"{phase}.context.json").read_bytes())
        refused = {r["name"]: r for r in record["kept_refused"]}
        for name in ("fixed.jsonl", "state.json", "run.log", "notes.txt"):
            assert name in refused and refused[name]["reason"] == "symlink_in_path", (phase, record["kept_refused"])
            assert name not in record["extra"]
        assert "secret.log" not in record["extra"] and "session.jsonl" not in record["extra"], record["extra"]
    assert refused["fixed.jsonl"]["at"] == "home/.adv-agent/logs" and refused["state.json"]["at"] == "home/.local"
    warnings = case.data.get("warnings") or []
    assert any(w.startswith("kept_file_refused: measured state.json: symlink_in_path") for w in warnings), warnings


def test_the_workspace_is_never_copied_through_a_link(links):
    """The reference driver keeps the measured workspace: a linked folder in it is listed, not followed;
    unconfined, the whole workspace swapped for a link to a folder holding the right hello.txt is not
    copied at all (the validator must not pass)."""
    if links is None:
        pytest.fail("arena broken")
    case = _case(links["res"], REFERENCE)
    _nothing_leaked(links)
    v = case.validator("file_equals")
    assert v is not None and not v["passed"], f"the validator read the host's hello.txt through a link: {v}"
    listing = case.listing()
    made = case.reports()[-1]["made"]
    if "workspace" in made:  # the swap worked (unconfined): nothing may be copied through it
        assert listing["files"] == 0 and "symlink_in_path" in (listing.get("error") or ""), listing
    else:
        assert any(e.get("path") == ".adv" and e.get("reason") == "symlink_not_followed"
                   for e in listing["entries"]), listing
        assert any(m.startswith("workspace: refused") for m in made), made
    out = links["arena"].cli("rebuild-reports", str(links["res"].run_dir), "--recompute", timeout=120)
    assert out.returncode == 0 and b"Traceback" not in out.stderr, out.explain()
    _nothing_leaked(links)
