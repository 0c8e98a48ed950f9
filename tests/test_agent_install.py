"""Pinned, cached agent installs from the real registries (tiny stand-in packages that ship a command)."""

from __future__ import annotations

import json
import re
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


# ------------------------------------------------------------------------------------------ progress

def test_an_install_reports_its_progress_on_stderr_in_plain_lines(tmp_path, capfd):
    """Not a terminal (CI, a pipe): what is installed, each step, periodic lines with the time so far and
    pip's own last line, the total time; only whole printable lines on stderr, nothing on stdout; the
    result is what it was without progress."""
    from gripprobe_core.cli.progress import PlainInstallProgress, make_install_progress

    assert type(make_install_progress()) is PlainInstallProgress  # captured stderr is not a terminal
    cache = AgentCache(tmp_path / "agents")
    # interval 0: a periodic line after every line pip prints (with a real interval a fast mirror can finish
    # pip's whole output between two ticks, and which of its lines a tick shows depends on timing)
    inst = cache.install("tool", PYPI, progress=PlainInstallProgress(interval=0.0))
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == f"installing tool: pypi tabulate 0.9.0 into {tmp_path / 'agents' / 'tool-0.9.0'}"
    assert "installing tool: creating a virtual environment (0s)" in lines
    assert any(line.startswith("installing tool: pip install tabulate==0.9.0 (") for line in lines)
    periodic = [line for line in lines if re.fullmatch(r"installing tool: \d+s, .*", line)]
    assert periodic, lines  # the venv alone takes seconds
    assert any("Collecting tabulate==0.9.0" in line or "tabulate-0.9.0" in line for line in periodic), lines
    assert re.fullmatch(r"installed tool 0\.9\.0 in \d+\.\d+s", lines[-1])
    # no \r, no escape sequences: captured output stays clean
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\x9b]", err)
    # the same install as ever
    assert inst == cache.installed("tool", PYPI) and inst.executable.exists()
    assert json.loads((inst.path / "gripprobe-install.json").read_text())["version"] == "0.9.0"
    assert subprocess.run([str(inst.executable), "--help"], capture_output=True).returncode == 0
    cache.install("tool", PYPI, progress=PlainInstallProgress(interval=0.2))  # cached: says nothing
    assert capfd.readouterr() == ("", "")


def test_a_failed_install_says_so_and_keeps_its_one_line_error(tmp_path, capfd):
    from gripprobe_core.cli.progress import PlainInstallProgress

    bad = InstallRecipe(kind="pypi", package="tabulate", version="0.0.0.999", executable="tabulate")
    with pytest.raises(InstallError) as exc:
        AgentCache(tmp_path).install("tool", bad, progress=PlainInstallProgress(interval=60))
    assert "cannot install tool" in str(exc.value) and "\n" not in str(exc.value)
    assert "0.0.0.999" in str(exc.value)  # pip's own last lines name what it could not find
    assert re.search(r"^installing tool failed after \d+\.\d+s$", capfd.readouterr().err, re.M)


def test_on_a_terminal_an_install_shows_a_spinner_then_one_line(tmp_path):
    import io

    from rich.console import Console

    from gripprobe_core.cli.progress import RichInstallProgress

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    inst = AgentCache(tmp_path).install("tool", NPM, progress=RichInstallProgress(console))
    assert inst.executable.exists()
    text = buf.getvalue()
    assert "installing tool: npm install semver@7.6.3" in text  # the spinner's line, redrawn in place
    assert re.search(r"installed tool 7\.6\.3 in \d+\.\d+s", text)


def test_output_lines_are_cleaned_of_carriage_returns_and_colours():
    from gripprobe_core.agents.install import clean_line

    assert clean_line("50%\r100% done\r\n") == "100% done"
    assert clean_line("\x1b[32mSuccessfully installed\x1b[0m x\n") == "Successfully installed x"
    assert clean_line("\x1b]0;title\x07npm http fetch") == "npm http fetch"
