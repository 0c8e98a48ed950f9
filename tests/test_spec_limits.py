"""Hostile spec files: too big, too many nodes, alias bombs, deep nesting, FIFOs. Each is refused with
``file:line: message`` and exit 2 by the real CLI, quickly, whatever the size of the file."""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time

from pathlib import Path

import pytest

from gripprobe_core.errors import SpecError
from gripprobe_core.specs import load_yaml_file
from gripprobe_core.specs.yaml_source import MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, read_yaml

#: The bound the issue asks for, CLI start-up included: CPU seconds (what a hostile file can make the parser
#: burn), not wall time, so that a loaded machine (CI's two workers beside real agents) does not fail it.
SECONDS = 5.0


def validate(root: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m gripprobe_core.cli validate --root ROOT`` from ROOT's parent; the CPU seconds it used."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "gripprobe_core.cli", "validate", "--root", "specs", "--no-shipped"],
                          cwd=root.parent, capture_output=True, text=True, env=env, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return done, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def spec_tree(tmp_path: Path, name: str, content: bytes) -> Path:
    """A spec tree holding one test file ``tests/<name>.yaml`` with ``content``."""
    root = tmp_path / "specs"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / f"{name}.yaml").write_bytes(content)
    return root


def just_under_limit(head: bytes, item: bytes, tail: bytes = b"") -> bytes:
    count = (MAX_FILE_BYTES - len(head) - len(tail)) // len(item)
    content = head + item * count + tail
    assert MAX_FILE_BYTES - len(item) < len(content) <= MAX_FILE_BYTES
    return content


def billion_laughs(levels: int = 9) -> bytes:
    lines = ["id: x", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]")
    return ("\n".join(lines) + "\n").encode()


def assert_refused(done: subprocess.CompletedProcess, seconds: float, pattern: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[-1] == "1 spec error(s)", lines
    assert re.fullmatch(pattern, lines[0]), lines[0]
    assert seconds < SECONDS, f"used {seconds:.1f} CPU seconds"


# --------------------------------------------------------------------------- through the real CLI

def test_a_50_mb_list_is_refused_before_parsing(tmp_path):
    item = b"- item\n"
    root = spec_tree(tmp_path, "big", b"id: big\nitems:\n" + item * 7_500_000)  # 52.5 MB, 7.5 M items
    assert (root / "tests" / "big.yaml").stat().st_size > 50_000_000
    done, seconds = validate(root)
    assert_refused(done, seconds, r"specs/tests/big\.yaml:1: file is 52,500,015 bytes, over the 512 KiB limit for "
                                  r"a spec file; .*")


@pytest.mark.parametrize("name, content, line", [
    ("block_items", just_under_limit(b"id: block_items\nitems:\n", b"- a\n"), MAX_NODES - 2),
    ("flow_items", just_under_limit(b"id: flow_items\nitems: [", b"a,", b"]\n"), 2),
    ("flow_maps", just_under_limit(b"id: flow_maps\nitems: [", b"{},", b"]\n"), 2),
], ids=["block list", "flow list", "flow list of mappings"])
def test_a_file_just_under_the_size_limit_of_tiny_items_is_stopped_while_parsing(tmp_path, name, content, line):
    root = spec_tree(tmp_path, name, content)
    done, seconds = validate(root)
    assert_refused(done, seconds, rf"specs/tests/{name}\.yaml:{line}: document too large: over "
                                  rf"{MAX_NODES:,} keys and values .*")


def test_an_alias_bomb_is_refused(tmp_path):
    root = spec_tree(tmp_path, "x", billion_laughs())  # 10**10 values once expanded, 600 bytes
    done, seconds = validate(root)
    assert_refused(done, seconds, r"specs/tests/x\.yaml:\d+: document too large: .*")


@pytest.mark.parametrize("content, line", [
    (b"id: x\na:\n" + b"".join(b" " * i + b"- \n" for i in range(1000)), 2 + MAX_DEPTH),
    (just_under_limit(b"id: x\na: ", b"["), 2),
    (just_under_limit(b"id: x\na: ", b"{a: "), 2),
], ids=["block", "flow lists", "flow mappings"])
def test_deep_nesting_is_refused_at_the_first_level_too_deep(tmp_path, content, line):
    root = spec_tree(tmp_path, "x", content)
    done, seconds = validate(root)
    assert_refused(done, seconds, rf"specs/tests/x\.yaml:{line}: nested more than {MAX_DEPTH} levels deep; .*")


# --------------------------------------------------------------------------- the limits themselves

def _items(n: int) -> bytes:
    return b"items:\n" + b"- a\n" * n


def test_the_node_limit_counts_keys_and_values(tmp_path):
    path = tmp_path / "n.yaml"
    path.write_bytes(_items(MAX_NODES - 3))  # root mapping + key + list + items
    assert read_yaml(path).issues == []
    path.write_bytes(_items(MAX_NODES - 2))
    (issue,) = read_yaml(path).issues
    assert issue.line == MAX_NODES - 1 and issue.message.startswith("document too large")


def test_the_depth_limit(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n")  # root + 63 lists
    assert read_yaml(path).issues == []
    path.write_text("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n")
    (issue,) = read_yaml(path).issues
    assert issue.message.startswith(f"nested more than {MAX_DEPTH} levels deep")


def test_the_size_limit_is_exact(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_bytes(b"a: " + b"x" * (MAX_FILE_BYTES - 4) + b"\n")
    assert read_yaml(path).issues == []
    path.write_bytes(b"a: " + b"x" * (MAX_FILE_BYTES - 3) + b"\n")
    (issue,) = read_yaml(path).issues
    assert (issue.line, issue.message.split(";")[0]) == (
        1, f"file is {MAX_FILE_BYTES + 1:,} bytes, over the 512 KiB limit for a spec file")


def test_alias_repeats_count_against_the_node_limit(tmp_path):
    # 2 levels of ten: about 1,200 values once expanded; 3 levels: over 12,000, from 300 bytes.
    path = tmp_path / "a.yaml"
    path.write_bytes(billion_laughs(2))
    assert read_yaml(path).issues == []
    path.write_bytes(billion_laughs(3))
    (issue,) = read_yaml(path).issues
    assert issue.message.startswith("document too large")


@pytest.mark.parametrize("content", [
    b"#c\n" * (MAX_FILE_BYTES // 3),                                # no node at all: the slowest to scan
    b"a: [\n" + b"#c\n" * ((MAX_FILE_BYTES - 8) // 3) + b"]\n",
    b"a: |\n" + b"  " + b"x" * 60 + b"\n" * ((MAX_FILE_BYTES - 8) // 63),
], ids=["comments", "comments in a flow list", "block scalar"])
def test_files_under_the_size_limit_without_many_nodes_are_quick(tmp_path, content):
    path = tmp_path / "c.yaml"
    path.write_bytes(content[:MAX_FILE_BYTES])
    started = time.process_time()
    read_yaml(path)
    assert time.process_time() - started < SECONDS


def test_a_fifo_is_not_read(tmp_path):
    os.mkfifo(tmp_path / "pipe.yaml")
    started = time.monotonic()
    with pytest.raises(SpecError) as info:
        load_yaml_file(tmp_path / "pipe.yaml")
    assert time.monotonic() - started < SECONDS
    assert info.value.errors[0].endswith(":1: not a regular file; a spec must be a plain YAML file")
