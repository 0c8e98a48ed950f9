"""The public plugin API: everything a plugin (its code and its tests) imports from GripProbe is public.

Public means ``gripprobe_core`` (its ``__all__``), ``gripprobe_core.plugin`` and the kit
``gripprobe_core.testing``. A plugin that reaches into the core's internals breaks when they move; this
test fails on the first such import in any plugin under plugins/ (and in the fixture plugins the tests
install as third parties)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import gripprobe_core
from conftest import AGENT_PLUGINS, ROOT

PUBLIC_MODULES = {"gripprobe_core", "gripprobe_core.plugin", "gripprobe_core.testing"}
PLUGIN_FILES = sorted([*ROOT.glob("plugins/gripprobe_*/src/**/*.py"), *ROOT.glob("plugins/gripprobe_*/tests/**/*.py"),
                       *ROOT.glob("tests/fixtures/plugins/*/src/**/*.py")])


def core_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of every import of gripprobe_core in ``path`` (names empty for ``import x``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] == "gripprobe_core":
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "gripprobe_core"]
    return out


def private_imports(path: Path) -> list[str]:
    problems = []
    for line, module, names in core_imports(path):
        where = f"{path.relative_to(ROOT)}:{line}"
        if module not in PUBLIC_MODULES:
            problems.append(f"{where}: imports {module} (private; use gripprobe_core.plugin or gripprobe_core.testing)")
            continue
        public = set(importlib.import_module(module).__all__)
        problems += [f"{where}: {module}.{n} is not public" for n in names if n != "*" and n not in public]
    return problems


def test_there_are_plugins_to_check():
    assert {p.parts[p.parts.index("plugins") + 1] for p in PLUGIN_FILES if "fixtures" not in p.parts} == set(AGENT_PLUGINS)


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_plugin_imports_only_public_names(path):
    assert private_imports(path) == []


def test_the_check_catches_a_private_import(tmp_path):
    bad = ROOT / "tests" / "_private_import_probe.py"
    try:
        bad.write_text("from gripprobe_core.runner.env import base_env\nfrom gripprobe_core.plugin import Nope\n"
                       "import gripprobe_core.proxy.text_tools\nfrom gripprobe_core.plugin import EventBuilder\n")
        assert [p.split(": ", 1)[1] for p in private_imports(bad)] == [
            "imports gripprobe_core.runner.env (private; use gripprobe_core.plugin or gripprobe_core.testing)",
            "gripprobe_core.plugin.Nope is not public",
            "imports gripprobe_core.proxy.text_tools (private; use gripprobe_core.plugin or gripprobe_core.testing)"]
    finally:
        bad.unlink()


@pytest.mark.parametrize("module", sorted(PUBLIC_MODULES))
def test_every_public_name_resolves(module):
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert getattr(mod, name) is not None or name == "__version__", f"{module}.{name}"


def test_the_top_level_package_stays_small():
    """``gripprobe_core`` re-exports the models and the few types most plugins need; the plugin API is
    ``gripprobe_core.plugin``."""
    assert len(gripprobe_core.__all__) <= 50
