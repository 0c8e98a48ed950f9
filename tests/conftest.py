"""Shared fixtures: real installs of the test plugin distributions, a CLI runner in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The real agents' plugin distributions under plugins/ (folder → the agent spec id its driver serves).
AGENT_PLUGINS = {"gripprobe_codex": "codex", "gripprobe_opencode": "opencode", "gripprobe_continue": "continue",
                 "gripprobe_gptme": "gptme", "gripprobe_aider": "aider", "gripprobe_claude": "claude-code",
                 "gripprobe_qwen": "qwen-code", "gripprobe_pi": "pi", "gripprobe_cline": "cline",
                 "gripprobe_miniswe": "mini-swe-agent", "gripprobe_acp": "qwen-code-acp"}
#: The plugins whose agents run in the conformance matrix (the ACP drivers run only its interaction column).
MATRIX_PLUGINS = {k: v for k, v in AGENT_PLUGINS.items() if k != "gripprobe_acp"}
FIXTURE_PLUGINS = ROOT / "tests" / "fixtures" / "plugins"
SPECS = ROOT / "specs"


def _core_src() -> list[Path]:
    """``ROOT/src`` when this test process imports gripprobe_core from there (a worktree run with
    PYTHONPATH=src while another checkout is the editable install), so the CLI subprocess runs the same code."""
    import gripprobe_core

    src = Path(gripprobe_core.__file__).resolve().parents[1]
    return [src] if src == ROOT / "src" else []


def pip_install_target(src: Path, target: Path) -> Path:
    """Really install a distribution (wheel build + dist-info) into ``target``; no network needed."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(src)], check=True,
                   capture_output=True, text=True)
    return target


@pytest.fixture(scope="session")
def installed_plugins(tmp_path_factory) -> dict[str, Path]:
    """Each fixture plugin installed alone into its own target directory (use via PYTHONPATH)."""
    base = tmp_path_factory.mktemp("plugins")
    return {d.name: pip_install_target(d, base / d.name) for d in sorted(FIXTURE_PLUGINS.iterdir()) if d.is_dir()}


def gripprobe(*args: str, pythonpath: list[Path] | None = None, env: dict | None = None, cwd: Path | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real `gripprobe` command in a subprocess."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("GRIPPROBE_") and k != "PYTHONPATH"}
    path = [*(pythonpath or []), *_core_src()]
    if path:
        e["PYTHONPATH"] = os.pathsep.join(map(str, path))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gripprobe_core.cli", *args], capture_output=True, text=True,
                          env=e, cwd=cwd or ROOT, timeout=timeout, stdin=subprocess.DEVNULL)


def run_reference(results: Path, *extra_plugins, models=("oracle-perfect",), tests=("shell_pwd",), specs: Path = SPECS,
                  without: tuple[str, ...] = (), **settings):
    """The reference agent × ``models`` × ``tests`` through the real runner, in this process, with the core's
    default plugins (minus ``without``) and ``extra_plugins``; the run's :class:`RunResult`."""
    from gripprobe_core.pluginmanager import make_plugin_manager
    from gripprobe_core.runner import RunSettings, execute_run, plan_cases
    from gripprobe_core.specs import load_specs

    plugins = make_plugin_manager(load_entry_points=False, extra=list(extra_plugins))
    for name in without:  # the core without one of its default plugins, e.g. no proxy at all
        plugins.pm.unregister(name=name)
    cases = plan_cases(load_specs(specs, registry=plugins.registry), agents=["reference"], models=list(models),
                       tests=list(tests))
    return execute_run(cases, plugins, RunSettings(results_root=results, **settings))


def planted_specs(dest: Path) -> Path:
    """The shipped specs with a planted regression: ``oracle-perfect`` answers as the lazy profile."""
    import shutil

    shutil.copytree(SPECS, dest)
    model = dest / "models" / "oracle-perfect.yaml"
    model.write_text(model.read_text().replace("model_id: perfect", "model_id: lazy"))
    return dest


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def strip_signatures(run: Path) -> None:
    """Make ``run`` an unsigned run, as a run of a version before signatures is: its signature files and the
    manifest's ``signing`` removed. Tests that edit a stored fact to see a recompute re-derive from it do
    this first (in a signed run any edit is ``artifact_tampered``: tests/test_signed_runs.py)."""
    for sig in [Path(run) / "run.sig.json", *Path(run).glob("cases/*/*.sig.json")]:
        sig.unlink(missing_ok=True)
    manifest = read_json(Path(run) / "manifest.json")
    manifest.pop("signing", None)
    (Path(run) / "manifest.json").write_text(json.dumps(manifest))


@pytest.fixture(scope="module")
def box():
    """The bubblewrap sandbox this machine runs (``resolve_sandbox("auto")``): a failure under CI=true when it
    cannot confine, a skip elsewhere (tests/test_sandbox.py, tests/test_sandbox_prestart.py)."""
    from gripprobe_core.runner.sandbox import resolve_sandbox

    found = resolve_sandbox("auto")
    if not found.confined:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bubblewrap is required under CI=true: {found.warning}")
        pytest.skip(f"bubblewrap does not work here: {found.warning}")
    return found
