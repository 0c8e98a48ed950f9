"""mypy over the core's public plugin API, its typed hook facade and every hook call site (the runner, the
default plugins, the backends), the signing of runs (integrity/, `gripprobe verify`), and over the five agent
plugins written against that API."""

from __future__ import annotations

import subprocess
import sys

from conftest import AGENT_PLUGINS, ROOT

CHECKED = [
    "src/gripprobe_core/__init__.py", "src/gripprobe_core/plugin.py", "src/gripprobe_core/drivers.py",
    "src/gripprobe_core/phase.py", "src/gripprobe_core/hooks.py", "src/gripprobe_core/hookspecs.py",
    "src/gripprobe_core/pluginmanager.py", "src/gripprobe_core/evaluator.py", "src/gripprobe_core/testing",
    "src/gripprobe_core/runner", "src/gripprobe_core/defaults", "src/gripprobe_core/backends",
    "src/gripprobe_core/integrity", "src/gripprobe_core/cli/verify_cmd.py",
]


def _mypy(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), *paths],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_public_api_facade_and_call_sites_type_check():
    res = _mypy(*CHECKED)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]


def test_the_agent_plugins_type_check_against_the_public_api():
    plugins = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "plugins").glob("gripprobe_*/src/gripprobe_*")
                     if (p / "__init__.py").is_file())
    assert len(plugins) == len(AGENT_PLUGINS), plugins
    res = _mypy(*plugins)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-2000:]
