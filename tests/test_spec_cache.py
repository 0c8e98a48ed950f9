"""The spec parse cache (specs/cache.py): a file's parse is reused only for the same bytes and the same
parser, and a cache entry is hostile input: whatever it holds, loading gives what parsing gives."""

from __future__ import annotations

import json
import os
import pickle

from pathlib import Path

import pytest

from gripprobe_core.specs import load_specs
from gripprobe_core.specs.cache import ParseCache, content_key

ROOT = Path(__file__).resolve().parents[1]
#: Three shipped specs (the one-case run's), copied into each test's own tree.
TREE = {rel: (ROOT / "specs" / rel).read_text(encoding="utf-8")
        for rel in ("models/oracle-perfect.yaml", "cli_agents/reference.yaml", "tests/save_file.yaml")}
LABEL_LINE = 1 + (ROOT / "specs/models/oracle-perfect.yaml").read_text().splitlines().index("label: Oracle (perfect)")


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "xdg-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv("GRIPPROBE_SPEC_CACHE", raising=False)
    return home


def write_tree(root: Path, files: dict[str, str] = TREE) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def entries(cache_home: Path) -> dict[str, Path]:
    return {p.stem: p for p in (cache_home / "gripprobe" / "specs").glob("*/*.json")}


def snapshot(specs) -> dict:
    """Everything a SpecSet says, comparable."""
    return {
        "models": {k: v.model_dump() for k, v in specs.models.items()},
        "agents": {k: v.model_dump() for k, v in specs.agents.items()},
        "tests": {k: v.model_dump() for k, v in specs.tests.items()},
        "suites": {k: v.model_dump() for k, v in specs.suites.items()},
        "hardware": specs.hardware.model_dump(),
        "files": dict(specs.files),
        "lines": {k: dict(v.lines) for k, v in specs.sources.items()},
        "notes": [n.format() for n in specs.notes],
    }


def fresh(root: Path, monkeypatch) -> dict:
    with monkeypatch.context() as m:
        m.setenv("GRIPPROBE_SPEC_CACHE", "0")
        return snapshot(load_specs(root))


def test_a_hit_reads_the_entry_and_gives_what_parsing_gives(tmp_path, cache_home, monkeypatch):
    root = write_tree(tmp_path / "specs")
    first = snapshot(load_specs(root))
    stored = entries(cache_home)
    assert set(stored) == {content_key((root / rel).read_bytes()) for rel in TREE}
    written = {k: p.stat().st_mtime_ns for k, p in stored.items()}
    second = snapshot(load_specs(root))
    assert first == second == fresh(root, monkeypatch)
    assert {k: p.stat().st_mtime_ns for k, p in entries(cache_home).items()} == written  # read, not rewritten
    # the entry is what a hit uses: a label changed in it (and only there) shows
    key = content_key((root / "models/oracle-perfect.yaml").read_bytes())
    doc = json.loads(stored[key].read_text())
    doc["data"]["label"] = "from the cache"
    stored[key].write_text(json.dumps(doc))
    assert load_specs(root).models["oracle-perfect"].label == "from the cache"


def test_any_byte_changed_is_a_miss(tmp_path, cache_home, monkeypatch):
    root = write_tree(tmp_path / "specs")
    load_specs(root)
    path = root / "models/oracle-perfect.yaml"
    before = set(entries(cache_home))
    path.write_bytes(path.read_bytes().replace(b"Oracle (perfect)", b"Oracle (perfecT)"))
    specs = load_specs(root)
    assert specs.models["oracle-perfect"].label == "Oracle (perfecT)"
    after = set(entries(cache_home))
    assert after - before == {content_key(path.read_bytes())}
    # bytes that change no value (a comment line) still make a new entry, and the lines move with them
    path.write_bytes(b"# a comment first\n" + path.read_bytes())
    assert snapshot(load_specs(root)) == fresh(root, monkeypatch)
    assert load_specs(root).where("model", "oracle-perfect", "label").endswith(f":{LABEL_LINE + 1}")
    assert content_key(path.read_bytes()) in entries(cache_home)


def test_a_file_with_problems_is_not_cached_and_errors_are_the_same(tmp_path, cache_home, monkeypatch):
    root = write_tree(tmp_path / "specs", {**TREE, "tests/two.yaml": "id: two\nprompt: x\n---\nid: again\n"})
    with pytest.raises(Exception) as cold:
        load_specs(root)
    with pytest.raises(Exception) as warm:
        load_specs(root)
    monkeypatch.setenv("GRIPPROBE_SPEC_CACHE", "0")
    with pytest.raises(Exception) as uncached:
        load_specs(root)
    assert cold.value.errors == warm.value.errors == uncached.value.errors
    assert any("more than one YAML document" in e for e in cold.value.errors)
    assert content_key((root / "tests/two.yaml").read_bytes()) not in entries(cache_home)


class _Boom:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def hostile_contents(marker: Path) -> list[bytes]:
    wrong_shape = {"format": 1, "parser": "x", "data": ["not", "a", "mapping"], "lines": []}
    return [
        b"",
        b"{not json",
        b"\xff\xfe garbage \x00",
        pickle.dumps(_Boom(marker)),
        json.dumps(wrong_shape).encode(),
        json.dumps({"data": {}, "lines": [[["id"], -3]]}).encode(),
        json.dumps({"format": 1, "parser": "x", "data": {"id": 1}, "lines": [[[{"a": 1}], 2]]}).encode(),
        b"[" * 100_000 + b"]" * 100_000,
        b'{"format": 1, "data": ' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}",
    ]


@pytest.mark.parametrize("index", range(len(hostile_contents(Path("x")))))
def test_a_corrupt_or_hostile_entry_is_ignored_and_rewritten(tmp_path, cache_home, monkeypatch, index):
    root = write_tree(tmp_path / "specs")
    load_specs(root)
    marker = tmp_path / "unpickled"
    victim = entries(cache_home)[content_key((root / "models/oracle-perfect.yaml").read_bytes())]
    victim.write_bytes(hostile_contents(marker)[index])
    assert snapshot(load_specs(root)) == fresh(root, monkeypatch)
    assert not marker.exists()  # never unpickled
    rewritten = json.loads(victim.read_bytes())
    assert rewritten["data"]["id"] == "oracle-perfect"


def test_an_entry_that_is_a_link_or_a_fifo_is_not_read(tmp_path, cache_home, monkeypatch):
    root = write_tree(tmp_path / "specs")
    load_specs(root)
    stored = entries(cache_home)
    model_key = content_key((root / "models/oracle-perfect.yaml").read_bytes())
    agent_key = content_key((root / "cli_agents/reference.yaml").read_bytes())
    elsewhere = tmp_path / "elsewhere.json"
    doc = json.loads(stored[model_key].read_text())
    doc["data"]["label"] = "through a link"
    elsewhere.write_text(json.dumps(doc))
    stored[model_key].unlink()
    stored[model_key].symlink_to(elsewhere)
    stored[agent_key].unlink()
    os.mkfifo(stored[agent_key])  # a read would block forever
    specs = load_specs(root)
    assert specs.models["oracle-perfect"].label == "Oracle (perfect)"
    assert snapshot(specs) == fresh(root, monkeypatch)


def test_another_version_or_parser_never_reads_these_entries(tmp_path, cache_home, monkeypatch):
    root = write_tree(tmp_path / "specs")
    load_specs(root)
    mine = ParseCache()
    key = content_key((root / "models/oracle-perfect.yaml").read_bytes())
    assert mine.get(key) is not None
    # another version (or an edited parser) has another fingerprint: a miss, and its first write removes
    # the old version's folder
    other = ParseCache(fingerprint="f" * 64)
    assert other.get(key) is None and other.misses == 1
    other.put(key, {"id": "oracle-perfect"}, {("id",): 1})
    assert not mine.folder.exists() and other.folder.is_dir()
    # an entry of another fingerprint copied into this version's folder is ignored too
    load_specs(root)
    target = ParseCache().folder / f"{key}.json"
    doc = json.loads(target.read_text())
    doc["parser"] = "0" * 64
    doc["data"]["label"] = "stale"
    target.write_text(json.dumps(doc))
    assert load_specs(root).models["oracle-perfect"].label == "Oracle (perfect)"
    assert json.loads(target.read_text())["parser"] == ParseCache().fingerprint


def test_values_json_cannot_carry_exactly_are_not_cached(tmp_path, cache_home):
    cache = ParseCache()
    cache.put("a" * 64, {"when": __import__("datetime").date(2026, 1, 1)}, {("when",): 1})
    cache.put("b" * 64, {"blob": b"\x00"}, {("blob",): 1})
    cache.put("c" * 64, {"ok": [1, 2.5, None, True, "x"]}, {("ok", 0): 1})
    assert cache.get("a" * 64) is None and cache.get("b" * 64) is None
    hit = cache.get("c" * 64)
    assert hit is not None and hit.data == {"ok": [1, 2.5, None, True, "x"]} and hit.lines == {("ok", 0): 1}
    assert type(hit.data["ok"][0]) is int and type(hit.data["ok"][1]) is float


def test_an_unwritable_cache_folder_costs_nothing_but_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    root = write_tree(tmp_path / "specs")
    assert snapshot(load_specs(root)) == fresh(root, monkeypatch)


def test_past_the_limit_the_oldest_half_is_removed(tmp_path, cache_home):
    from gripprobe_core.specs.cache import MAX_ENTRIES

    cache = ParseCache()
    cache.folder.mkdir(parents=True)
    for i in range(MAX_ENTRIES + 2):
        entry = cache.folder / f"{i:064x}.json"
        entry.write_text("{}")
        os.utime(entry, ns=(i * 10**9, i * 10**9))
    cache.prune()
    left = sorted(int(p.stem, 16) for p in cache.folder.glob("*.json"))
    total = MAX_ENTRIES + 2
    assert left == list(range(total // 2, total))  # the newest half kept
