"""mini-swe-agent's driver: environment, config file, command, kept files, parsing, registration (the kit's
fixtures: the real plugin manager and a phase context laid out like the runner's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gripprobe_core.plugin import BackendSpec, PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_core.testing import DriverContract, repo_specs
from gripprobe_miniswe import EXECUTABLE, NAME, PINNED_VERSION, PYPI_PACKAGE
from gripprobe_miniswe.config import DUMMY_API_KEY, QUIET_ENV, config_file, trajectory_path
from gripprobe_miniswe.parse import TRAJECTORY_ARTIFACT

CAPTURED = Path(__file__).resolve().parent / "fixtures" / "captured"
#: A prompt that starts with "-" and holds "--": it must still reach mini as the task, not as options.
PROMPT = "-- Run `pwd` and save it to pwd.txt.\n--yolo is not an option here."


class TestMiniSweContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for mini: its trajectory is the kept
    file; end to end, a shell test and a write in the ``tool`` format, where every call is structured with
    the model's id (the ``markdown`` format end to end: test_miniswe_e2e.py)."""

    kept_files = (TRAJECTORY_ARTIFACT,)
    kept_paths = ("home/.local/share/mini-swe-agent/measured.traj.json",)
    e2e_tests = ("shell_pwd", "save_file")
    e2e_format = "tool"


def test_env_points_litellm_at_the_phase_url_and_switches_off_what_calls_home(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(base_url="http://127.0.0.1:5555")  # the recording proxy's root in auto mode
    env = agent_driver.environment(ctx)
    assert env["OPENAI_BASE_URL"] == env["OPENAI_API_BASE"] == "http://127.0.0.1:5555/v1"
    assert env["OPENAI_API_KEY"] == DUMMY_API_KEY
    assert {k: env[k] for k in QUIET_ENV} == QUIET_ENV
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # else litellm fetches its price map from GitHub
    assert env["MSWEA_CONFIGURED"] == "true"  # else the first start asks for a model and a key on stdin
    assert env["MSWEA_COST_TRACKING"] == "ignore_errors"  # else an unpriced model is a RuntimeError
    assert env["MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"] == "2"  # mini's default: 10 attempts, 4-60 s apart
    config_dir = Path(env["MSWEA_GLOBAL_CONFIG_DIR"])
    assert config_dir.is_dir() and config_dir.is_relative_to(ctx.home) and not any(config_dir.glob(".env"))


def test_the_config_file_holds_the_base_url_and_the_workspace_only(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(base_url="http://127.0.0.1:5555", api_key="sk-canary-mini-1")
    agent_driver.environment(ctx)
    path = config_file(ctx.home)
    assert path.is_relative_to(ctx.home) and path.suffix == ".yaml"
    assert json.loads(path.read_text()) == {"model": {"model_kwargs": {"api_base": "http://127.0.0.1:5555/v1"}},
                                            "environment": {"cwd": str(ctx.workspace)}}
    written = [p for p in ctx.home.rglob("*") if p.is_file()]
    assert written == [path]


def test_the_key_goes_to_the_environment_only(agent_driver, make_phase_ctx, tmp_path):
    key = "sk-canary-mini-4242"
    ctx = make_phase_ctx(api_key=key)
    env = agent_driver.environment(ctx)
    assert env["OPENAI_API_KEY"] == key
    assert key not in " ".join(agent_driver.command(ctx).argv)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


@pytest.mark.parametrize("fmt,model_class,shipped", [("markdown", "litellm_textbased", "mini_textbased.yaml"),
                                                     ("tool", "litellm", "mini.yaml")])
def test_command_is_the_installed_mini_unattended_in_the_cases_format(agent_driver, make_phase_ctx, fmt,
                                                                      model_class, shipped):
    ctx = make_phase_ctx(fmt=fmt, model_name="lazy", prompt=PROMPT)
    cmd = agent_driver.command(ctx)
    argv = cmd.argv
    assert argv[0] == str(ctx.agent_executable)
    assert argv[argv.index("--model") + 1] == "openai/lazy"
    assert argv[argv.index("--model-class") + 1] == model_class
    assert {"--yolo", "--exit-immediately"} <= set(argv)
    assert argv[argv.index("--cost-limit") + 1] == "0"
    configs = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
    assert configs == [shipped, str(config_file(ctx.home))]  # mini's shipped config first, ours merged over it
    assert argv[argv.index("--output") + 1] == str(trajectory_path(ctx.home, "measured"))
    assert argv[-1] == f"--task={PROMPT}"  # one token: a prompt starting with "-" stays the task
    assert cmd.stdin is None and cmd.cwd is None


def test_a_format_mini_does_not_have_runs_its_default_tool_calls(agent_driver, make_phase_ctx):
    argv = agent_driver.command(make_phase_ctx(fmt="xml")).argv
    assert argv[argv.index("--model-class") + 1] == "litellm" and "mini.yaml" in argv


def test_artifacts_are_this_phases_trajectory(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(phase="warmup")
    assert agent_driver.artifacts(ctx) == {
        TRAJECTORY_ARTIFACT: ctx.home / ".local" / "share" / "mini-swe-agent" / "warmup.traj.json"}


def capture_of(tmp_path: Path, trajectory: Path | None, exit_code: int = 0) -> PhaseCapture:
    (tmp_path / "out").write_bytes(b"")
    (tmp_path / "err").write_bytes(b"")
    return PhaseCapture(stdout_path=tmp_path / "out", stderr_path=tmp_path / "err",
                        process=ProcessResult(status="ok" if exit_code == 0 else "nonzero_exit", exit_code=exit_code),
                        files={TRAJECTORY_ARTIFACT: trajectory} if trajectory else {})


def test_parse_reads_the_kept_trajectory_and_the_final_text(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(fmt="markdown")
    transcript = agent_driver.parse(ctx, capture_of(tmp_path, CAPTURED / "markdown_perfect" / "trajectory.json"))
    assert {e.source_tier for e in transcript.events} == {"B"}
    assert [e.event_type for e in transcript.events].count("tool_call_start") == 2
    assert transcript.final_text == "THOUGHT: Done. Steps performed: 1. write greeting.txt."


def test_parse_without_a_trajectory_is_a_parse_error_only_after_a_clean_exit(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx()
    with pytest.raises(WrapperParseError):
        agent_driver.parse(ctx, capture_of(tmp_path, None))
    assert agent_driver.parse(ctx, capture_of(tmp_path, None, exit_code=1)).events == []


def test_install_recipe_route_and_registration(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("pypi", PYPI_PACKAGE, "2.4.6", "mini")
    unpinned = agent_spec.model_copy(update={"version": None})
    assert agent_driver.install_recipe(unpinned).version == PINNED_VERSION
    assert agent_driver.route(agent_spec, BackendSpec(id="o", kind="oracle", model_id="perfect")).routable
    assert agent_driver.observability == "structured"
    # only the text format runs commands the wire carries as reply text; the tool format's calls are structured
    assert set(agent_driver.calls_off_wire) == {"markdown"} and "reply text" in agent_driver.calls_off_wire["markdown"]


def test_minis_tool_names_and_dialects(agent_driver):
    names = agent_driver.tool_names
    assert names.normalize("bash") == names.normalize("mswea_bash_command") == ("shell", "execute")
    assert list(agent_driver.oracle_dialects()) == ["mini-swe-agent-markdown", "mini-swe-agent-tool"]


def test_the_repo_spec_matches_the_plugin(agent_spec):
    if repo_specs(Path(__file__)) is None:
        pytest.skip("not inside the GripProbe repository")
    spec = agent_spec
    assert (spec.id, spec.plugin, spec.executable, spec.version) == (NAME, NAME, EXECUTABLE, PINNED_VERSION)
    assert spec.formats == ["markdown", "tool"] and set(spec.tool_kinds) == {"execute", "read", "write"}
    assert spec.default_args == []
