"""The core's imports run downwards: the command line on top, the runner and reports below it, then the proxy,
oracle and backends, then telemetry, the store and the models. A module that imports a layer above its own
fails here, naming the line (the three that ran back up — the Ray executor into the CLI, the oracle into
the backends, the usage counter into the proxy — were moved down)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "gripprobe_core"

#: package (first path component below gripprobe_core) → the packages it must never import
FORBIDDEN: dict[str, set[str]] = {
    "models": {"cli", "view", "runner", "reports", "export", "proxy", "oracle", "backends", "telemetry", "store", "specs"},
    "store": {"cli", "view", "runner", "reports", "export", "proxy", "oracle", "backends"},
    "telemetry": {"cli", "view", "runner", "reports", "export", "proxy", "oracle", "backends"},
    "oracle": {"cli", "view", "runner", "reports", "export", "backends", "proxy"},
    "proxy": {"cli", "view", "runner", "reports", "export", "oracle", "backends"},
    "backends": {"cli", "view", "runner", "reports", "export"},
    "agents": {"cli", "view", "runner", "reports", "export"},
    "validators": {"cli", "view", "runner", "reports", "export"},
    "integrity": {"cli", "view", "runner", "reports", "export", "proxy", "oracle", "backends"},
    "runner": {"cli", "view"},
    "reports": {"cli", "view"},
    "export": {"cli", "view"},
    "view": {"cli"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported gripprobe_core package) of every import in ``path``, relative ones resolved."""
    rel = path.relative_to(SRC)
    package = list(rel.parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = [*base, *(node.module.split(".") if node.module else [])]
                if not node.module:  # from .. import x, y: each name may be a package
                    out += [(node.lineno, ([*base, a.name])[0]) for a in node.names if [*base, a.name]]
                    continue
            elif node.module and node.module.startswith("gripprobe_core."):
                target = node.module.split(".")[1:]
            else:
                continue
            if target:
                out.append((node.lineno, target[0]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("gripprobe_core.")]
    return out


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_runs_back_up(layer):
    bad = []
    for path in _modules():
        rel = path.relative_to(SRC)
        if rel.parts[0] != layer:
            continue
        for line, target in _imports(path):
            if target in FORBIDDEN[layer]:
                bad.append(f"{rel}:{line} imports {target}/")
    assert not bad, "imports that run back up a layer:\n" + "\n".join(bad)


def test_nothing_but_the_command_line_imports_it():
    bad = [f"{p.relative_to(SRC)}:{line}" for p in _modules() if p.relative_to(SRC).parts[0] != "cli"
           and p.name != "_docgen.py" for line, target in _imports(p) if target == "cli"]
    assert not bad, f"modules below the command line import it: {bad}"


def test_the_rule_can_fail(tmp_path):
    """The import scanner sees relative and absolute imports of a layer."""
    probe = SRC / "oracle" / "_layers_probe.py"
    probe.write_text("from ..backends import toolprobe\nfrom gripprobe_core.runner import run\nfrom . import wire\n")
    try:
        assert [t for _, t in _imports(probe)] == ["backends", "runner", "oracle"]
    finally:
        probe.unlink()
