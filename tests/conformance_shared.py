"""What the conformance test files share: scripts/conformance.py loaded as a module, the agents each suite runs,
and the plugins' presence (a file of its own: tests/test_conformance*.py are three files so that their three real
runs take the test workers side by side under --dist loadfile)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from conftest import AGENT_PLUGINS, MATRIX_PLUGINS, ROOT, gripprobe

_spec = importlib.util.spec_from_file_location("conformance", ROOT / "scripts" / "conformance.py")
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)

PLUGINS = sorted(AGENT_PLUGINS)
AGENTS = {"reference", *MATRIX_PLUGINS.values()}
#: The interaction column also has the ACP drivers' agents (specs/suites/interaction.yaml).
ACP_AGENTS = {"qwen-code-acp", "opencode-acp", "claude-code-acp", "codex-acp"}
MISSING = [p for p in PLUGINS if importlib.util.find_spec(p) is None]


def skip_unless_plugins() -> None:
    """Outside CI a file of real agents is skipped when a plugin is missing; under CI it runs (and fails)."""
    if MISSING and not os.environ.get("CI"):
        pytest.skip(f"agent plugins not installed: {', '.join(MISSING)} (./dev setup installs them)",
                    allow_module_level=True)


def run_suite(suite: str, out: Path) -> Path:
    """A real run of ``suite`` into ``out`` (under CI inside the sandbox: --sandbox bwrap exits 2 where bubblewrap
    cannot run); its run folder."""
    assert not MISSING, f"CI must have every agent plugin installed; missing: {MISSING}"
    sandbox = ["--sandbox", "bwrap"] if os.environ.get("CI") else []
    res = gripprobe("run", "--suite", suite, "--results", str(out), *sandbox, timeout=3000)
    assert res.returncode == 0, res.stderr[-4000:]
    return Path(res.stdout.strip().splitlines()[-1])
