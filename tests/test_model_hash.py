"""An oracle run records its model hash at run time: the digest backfill would compute, one per profile,
changing with the oracle's code and nothing else (runner/backfill.py ``run_time_hash``, oracle/fingerprint.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import read_json, run_reference
from gripprobe_core.oracle.fingerprint import code_digest, code_text, profile_digest
from gripprobe_core.pluginmanager import make_plugin_manager
from gripprobe_core.runner.backfill import backfill_runs

ORACLE_SRC = Path(__file__).resolve().parents[1] / "src" / "gripprobe_core" / "oracle"


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory):
    """The reference agent on save_file against two profiles, through the real runner."""
    return run_reference(tmp_path_factory.mktemp("hash"), models=("oracle-perfect", "oracle-malformed-args"),
                         tests=("save_file",))


def _hashes(run) -> dict[str, str | None]:
    return {r.key.model: read_json(run.run_dir.case(r.case_id) / "case.json")["model_hash"] for r in run.results}


def test_an_oracle_run_records_the_profile_digest_in_case_json(oracle_run):
    hashes = _hashes(oracle_run)
    assert hashes["oracle-perfect"] == "sha256:" + profile_digest("perfect")
    assert hashes["oracle-malformed-args"] == "sha256:" + profile_digest("malformed-args")
    assert hashes["oracle-perfect"] != hashes["oracle-malformed-args"]  # two profiles, two hashes
    assert {r.model_hash for r in oracle_run.results} == set(hashes.values())  # the result returned says the same


def test_backfill_finds_nothing_to_fill_on_a_fresh_oracle_run(oracle_run):
    rows = backfill_runs([oracle_run.run_dir], make_plugin_manager(load_entry_points=False).registry.backends,
                         dry_run=True)
    assert len(rows) == 2 and {r.outcome for r in rows} == {"same"}, [(r.case_id, r.outcome, r.detail) for r in rows]


def test_the_digest_is_the_same_in_another_process_and_on_another_path(tmp_path):
    """Nothing machine- or run-specific goes in: another interpreter (another hash seed, working directory)
    and a copy of the package elsewhere give the same digests."""
    out = subprocess.run([sys.executable, "-c", "from gripprobe_core.oracle.fingerprint import profile_digest as d;"
                          "print(d('perfect'), d('lazy:latest'))"], capture_output=True, text=True, check=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONHASHSEED": "12345"}).stdout.split()
    assert out == [profile_digest("perfect"), profile_digest("lazy")]
    copy = shutil.copytree(ORACLE_SRC, tmp_path / "elsewhere", ignore=shutil.ignore_patterns("__pycache__"))
    assert code_digest(copy) == code_digest()


def test_the_digest_changes_with_the_oracles_code_and_not_with_its_prose(tmp_path):
    copy = shutil.copytree(ORACLE_SRC, tmp_path / "oracle", ignore=shutil.ignore_patterns("__pycache__"))
    profiles = copy / "profiles.py"
    original = profiles.read_text()
    prose = original.replace("# -------------------------------------------------------------------------------- "
                             "misbehaviours", "# misbehaviours, reworded\n\n\n# and a new comment")
    prose = prose.replace('"""Performs the reference actions in order', '"""Does the reference actions in order')
    assert prose != original
    profiles.write_text(prose)
    assert code_digest(copy) == code_digest()  # comments and docstrings are not behaviour
    behaviour = original.replace('SIDE_ANSWER = "GripProbe oracle session"', 'SIDE_ANSWER = "GripProbe oracle"')
    assert behaviour != original
    profiles.write_text(behaviour)
    assert code_digest(copy) != code_digest()  # a reply changed: every profile gets a new hash


def test_code_text_keeps_code_and_drops_comments_docstrings_and_layout():
    a = 'def f(x):\n    """Doc."""\n    # note\n    return  x + 1  # trailing\n\n\nY = f"{1}a"\n'
    b = 'def f(x):\n\n    return x + 1\nY = f"{1}a"\n'
    assert code_text(a) == code_text(b) == 'def f ( x ) :\n  return x + 1\nY = f"{1}a"\n'
    assert code_text(a) != code_text(a.replace("x + 1", "x + 2"))
    assert code_text(a) != code_text(a.replace('f"{1}a"', 'f"{1}b"'))


# ------------------------------------------------------------------------ the digest's cache (by raw bytes)

def test_the_cached_digest_is_the_computed_one_and_is_read_back(tmp_path):
    from gripprobe_core.oracle.fingerprint import cached_digest

    copy = shutil.copytree(ORACLE_SRC, tmp_path / "oracle", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    assert cached_digest(copy, str(cache)) == code_digest(copy) == code_digest()
    [entry] = list(cache.iterdir())
    assert entry.read_text().strip() == code_digest()
    # the entry is what a second call answers with (a planted value shows it was read, not recomputed)
    entry.write_text("0" * 64 + "\n")
    assert cached_digest(copy, str(cache)) == "0" * 64


@pytest.mark.parametrize("content", ["", "not a digest", "A" * 64, "0" * 65, "0" * 63, "\xff" * 64, "0" * 64 + "x" * 9000])
def test_an_entry_that_is_not_a_digest_is_recomputed_and_rewritten(tmp_path, content):
    from gripprobe_core.oracle.fingerprint import cached_digest

    cache = tmp_path / "cache"
    cached_digest(ORACLE_SRC, str(cache))
    [entry] = list(cache.iterdir())
    entry.write_bytes(content.encode("latin-1"))
    assert cached_digest(ORACLE_SRC, str(cache)) == code_digest()
    assert entry.read_text().strip() == code_digest()


def test_an_entry_behind_a_link_is_not_read(tmp_path):
    from gripprobe_core.oracle.fingerprint import cached_digest

    cache = tmp_path / "cache"
    cached_digest(ORACLE_SRC, str(cache))
    [entry] = list(cache.iterdir())
    planted = tmp_path / "planted"
    planted.write_text("1" * 64)
    entry.unlink()
    entry.symlink_to(planted)
    assert cached_digest(ORACLE_SRC, str(cache)) == code_digest()


def test_an_edit_to_any_module_is_another_entry(tmp_path):
    """Prose edits keep the digest but are new bytes: a new key, computed again (the same digest); a code edit
    gives its own digest, never the cached one of the old bytes."""
    from gripprobe_core.oracle.fingerprint import cached_digest

    copy = shutil.copytree(ORACLE_SRC, tmp_path / "oracle", ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    cached_digest(copy, str(cache))
    wire = copy / "wire.py"
    wire.write_text(wire.read_text() + "\n# a comment\n")
    assert cached_digest(copy, str(cache)) == code_digest()
    wire.write_text(wire.read_text() + "\nEXTRA = 1\n")
    assert cached_digest(copy, str(cache)) == code_digest(copy) != code_digest()
    assert len(list(cache.iterdir())) == 3


def test_the_package_digest_uses_the_cache_under_xdg_cache_home(tmp_path):
    """A fresh process computes and stores the package's digest; the next reads it back (both the same)."""
    code = "from gripprobe_core.oracle.fingerprint import profile_digest as d; print(d('perfect'))"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    entries = list((tmp_path / "gripprobe" / "oracle").iterdir())
    assert len(entries) == 1 and entries[0].read_text().strip() == code_digest()
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert first.split() == second.split() == [profile_digest("perfect")]
