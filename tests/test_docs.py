"""Docs check themselves: the hook reference and CLI reference match the code; every hook is tested."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gripprobe_core import _docgen

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("rel", sorted(_docgen.TARGETS))
def test_generated_docs_are_current(rel):
    want = _docgen.TARGETS[rel]()
    have = (ROOT / rel).read_text(encoding="utf-8")
    assert have == want, f"{rel} is stale: run `.venv/bin/python -m gripprobe_core._docgen`"


def test_every_hook_is_documented_with_its_signature():
    text = (ROOT / "docs/hooks.md").read_text()
    for name in _docgen.hook_names():
        assert re.search(rf"^### `{name}`", text, re.M), name
        assert f"def {name}(" in text


def test_every_hook_is_exercised_by_a_test():
    """datasette's rule: a hook nobody tests is a hook nobody can rely on."""
    corpus = "\n".join(p.read_text(errors="replace") for p in (ROOT / "tests").rglob("*.py"))
    for name in _docgen.hook_names():
        assert re.search(rf"\b{name}\b", corpus.replace("_docgen.hook_names", "")), f"no test mentions hook {name}"


def test_readme_quickstart_has_exactly_two_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quickstart\n.*?```(?:bash|sh)\n(.*?)```", text, re.S)
    assert block, "README needs a Quickstart section with a bash block"
    commands = [ln for ln in block.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert commands == ["./dev run", "./dev test"]
    ci = (ROOT / ".ci/run").read_text()
    assert "./dev test" in ci


def test_user_guide_yaml_examples_are_valid_specs(tmp_path):
    """The test and suite examples in the user guide load against the shipped specs."""
    import shutil

    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.specs import load_specs

    root = tmp_path / "specs"
    shutil.copytree(ROOT / "specs", root)
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs/user-guide.md").read_text(), re.S)
    placed = 0
    for block in blocks:
        m = re.match(r"id: (\S+)", block)
        if not m:
            continue
        folder = "suites" if re.search(r"^agents:", block, re.M) else "tests"
        (root / folder / f"{m.group(1)}.yaml").write_text(block)
        placed += 1
    assert placed >= 2
    specs = load_specs(root, registry=make_plugin_manager(load_entry_points=False).registry)
    assert "save_greeting" in specs.tests and "nightly" in specs.suites
