"""Pinned, cached agent installs from the real registries (tiny stand-in packages that ship a command)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from gripprobe_core import InstallRecipe
from gripprobe_core.agents import AgentCache, InstallError

PYPI = InstallRecipe(kind="pypi", package="tabulate", version="0.9.0", executable="tabulate")
NPM = InstallRecipe(kind="npm", package="semver", version="7.6.3", executable="semver")


@pytest.mark.parametrize("recipe", [PYPI, NPM], ids=["pypi", "npm"])
def test_install_is_pinned_cached_and_idempotent(tmp_path, recipe):
    cache = AgentCache(tmp_path / "agents")
    assert cache.installed("tool", recipe) is None
    first = cache.install("tool", recipe, log=lambda m: None)
    assert first.path == tmp_path / "agents" / f"tool-{recipe.version}"
    assert first.executable.exists()
    meta = json.loads((first.path / "gripprobe-install.json").read_text())
    assert meta["version"] == recipe.version and meta["package"] == recipe.package
    t0 = time.monotonic()
    again = cache.install("tool", recipe, log=lambda m: pytest.fail("reinstalled"))
    assert again == first and time.monotonic() - t0 < 0.5
    if recipe.kind == "npm":
        out = subprocess.run([str(first.executable), "--help"], capture_output=True, text=True)
        assert "SemVer" in out.stdout or "semver" in out.stdout.lower()
    else:
        assert subprocess.run([str(first.executable), "--help"], capture_output=True).returncode == 0


def test_interrupted_install_is_redone(tmp_path):
    cache = AgentCache(tmp_path)
    d = cache.directory("tool", PYPI)
    d.mkdir(parents=True)
    (d / "half-done").write_text("x")  # no marker: an earlier attempt died
    inst = cache.install("tool", PYPI, log=lambda m: None)
    assert inst.executable.exists() and not (d / "half-done").exists()


def test_wrong_executable_name_is_a_clear_error(tmp_path):
    bad = InstallRecipe(kind="pypi", package="tabulate", version="0.9.0", executable="no-such-command")
    with pytest.raises(InstallError, match="no-such-command is missing"):
        AgentCache(tmp_path).install("tool", bad, log=lambda m: None)


def test_unknown_version_is_a_one_line_error(tmp_path):
    bad = InstallRecipe(kind="pypi", package="tabulate", version="0.0.0.999", executable="tabulate")
    with pytest.raises(InstallError) as exc:
        AgentCache(tmp_path).install("tool", bad, log=lambda m: None)
    assert "cannot install tool" in str(exc.value) and "\n" not in str(exc.value)


def test_an_install_recipe_drives_run_time_resolution(tmp_path):
    """An agent whose driver has an install recipe is SKIPPED with the fix when it is not installed."""
    from conftest import SPECS
    from gripprobe_core import hookimpl
    from gripprobe_core.defaults.refagent import ReferenceDriver
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner import RunSettings, execute_run, plan_cases
    from gripprobe_core.specs import load_specs

    class Installable(ReferenceDriver):
        name = "installable"

        def install_recipe(self, agent):
            return PYPI

    class Plugin:
        @hookimpl
        def register_agents(self, register):
            register(Installable())

    gpm = make_plugin_manager(load_entry_points=False, extra=[Plugin()])
    specs = load_specs(SPECS, registry=gpm.registry)
    reference = specs.agents["reference"]
    specs.agents["reference"] = reference.model_copy(update={"plugin": "installable"})
    cases = plan_cases(specs, agents=["reference"], models=["oracle-perfect"], tests=["shell_pwd"])
    r = execute_run(cases, gpm, RunSettings(results_root=tmp_path)).results[0]
    assert r.verdict.status == "SKIPPED" and "gripprobe agents install reference" in r.skip_reason
