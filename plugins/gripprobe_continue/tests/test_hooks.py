"""The plugin's hooks, through the real plugin manager (entry point discovery) and directly."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from cn_helpers import SAMPLES, agent_spec, make_ctx
from gripprobe_continue import config, plugin
from gripprobe_core import BackendSpec, PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_core.pluginmanager import make_plugin_manager

SECRET = "sk-gripprobe-test-0123456789abcdef"


@pytest.fixture(scope="module")
def gpm():
    return make_plugin_manager()


def remote_backend() -> BackendSpec:
    return BackendSpec(id="b", kind="openai-compatible", model_id="m", base_url="http://127.0.0.1:1/v1")


def test_registered_through_the_entry_point(gpm):
    info = gpm.registry.agents["continue"]
    assert info.observability == "structured"
    recipe = gpm.hook.agent_install_recipe(agent=agent_spec())
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("npm", "@continuedev/cli", "1.5.47", "cn")
    assert gpm.hook.route_base_url(agent=agent_spec(), backend=remote_backend()).routable is True


def test_other_agents_are_not_answered(tmp_path, gpm):
    other = agent_spec(id="x", plugin="someone-else")
    ctx = make_ctx(tmp_path)
    assert plugin.build_env(other, ctx) is None and plugin.build_command(other, ctx) is None
    assert plugin.agent_install_recipe(other) is None and plugin.route_base_url(other, remote_backend()) is None
    assert plugin.phase_artifacts(other, ctx) is None
    outputs = PhaseCapture(tmp_path / "o", tmp_path / "e", ProcessResult(status="ok", exit_code=0))
    assert plugin.parse_wrapper_events(other, ctx, outputs) is None
    assert plugin.final_output_text(other, ctx, outputs) is None
    assert not any((ctx.home).iterdir())  # nothing written for someone else's agent


def test_build_env_writes_config_in_home_only(tmp_path, gpm):
    ctx = make_ctx(tmp_path, api_key=SECRET, base_url="http://127.0.0.1:5555/")
    env = gpm.hook.build_env(agent=agent_spec(), ctx=ctx)
    cfg_path = ctx.home / ".continue" / "config.yaml"
    assert cfg_path.is_file() and (cfg_path.stat().st_mode & 0o777) == 0o600
    cfg = YAML(typ="safe").load(cfg_path.read_text())
    (model,) = cfg["models"]
    assert cfg["schema"] == "v1"
    assert model["provider"] == "openai" and model["model"] == "perfect"
    assert model["apiBase"] == "http://127.0.0.1:5555/v1" and model["apiKey"] == SECRET
    assert model["capabilities"] == ["tool_use"] and set(model["roles"]) >= {"chat", "edit", "apply"}
    assert env["CONTINUE_GLOBAL_DIR"] == str(ctx.home / ".continue")
    assert env["CONTINUE_CLI_ENABLE_TELEMETRY"] == "0" and env["CONTINUE_METRICS_ENABLED"] == "0"
    # the OPENAI_BASE_URL trap: whatever a backend env said, the agent's SDK sees the phase's URL
    assert env["OPENAI_BASE_URL"] == ctx.openai_base_url
    assert env["CONTINUE_API_BASE"].startswith("http://127.0.0.1:")
    assert SECRET not in "".join(env.values())
    # the key lives in HOME only: nothing else under the phase's directories holds it
    for path in tmp_path.rglob("*"):
        if path.is_file() and ctx.home not in path.parents:
            assert SECRET not in path.read_text(errors="replace"), path


def test_config_quotes_awkward_names(tmp_path):
    name = 'we"ird: model\n# not a comment — ünï'
    path = config.write_config(tmp_path, model_name=name, api_base="http://h:1/v1", api_key=None)
    (model,) = YAML(typ="safe").load(path.read_text())["models"]
    assert model["model"] == name and model["apiKey"] == config.DUMMY_API_KEY


def test_build_command(tmp_path, gpm):
    exe = tmp_path / "node_modules" / ".bin" / "cn"
    ctx = make_ctx(tmp_path, executable=exe, prompt="-p looks like a flag")
    cmd = gpm.hook.build_command(agent=agent_spec(), ctx=ctx)
    assert cmd.argv[0] == str(exe)
    assert cmd.argv[1:] == ["-p", "--auto", "--verbose", "--config", str(ctx.home / ".continue" / "config.yaml"),
                            "--", "-p looks like a flag"]
    assert cmd.stdin is None and cmd.cwd is None  # stdin /dev/null, cwd = workspace
    bare = make_ctx(tmp_path / "b")
    assert gpm.hook.build_command(agent=agent_spec(), ctx=bare).argv[0] == "cn"


def _home_with_run(ctx, *, key_in_log: str) -> None:
    sessions = ctx.home / ".continue" / "sessions"
    sessions.mkdir(parents=True)
    old = sessions / "11111111-old.json"
    shutil.copy(SAMPLES / "no_tool" / "session.json", old)
    os.utime(old, (time.time() - 100, time.time() - 100))
    shutil.copy(SAMPLES / "success" / "session.json", sessions / "22222222-new.json")
    (sessions / "sessions.json").write_text("[]")
    logs = ctx.home / ".continue" / "logs"
    logs.mkdir()
    (logs / "cn.log").write_text(
        f'2026-11-22 11:00:00.000 [a] [debug]: Creating chat completion stream {{"model":{{"apiKey":"{key_in_log}"}}}}\n'
        f"2026-11-22 11:00:00.100 [a] [debug]: Authorization: Bearer {key_in_log}\n")


def test_phase_artifacts_newest_session_and_redacted_log(tmp_path):
    ctx = make_ctx(tmp_path, api_key=SECRET)
    _home_with_run(ctx, key_in_log=SECRET)
    found = plugin.phase_artifacts(agent_spec(), ctx)
    assert found["session.json"].name == "22222222-new.json"
    log = found["cn.log"]
    assert log.parent == ctx.home / ".continue" / "logs" and log.name != "cn.log"
    text = log.read_text()
    assert SECRET not in text and text.count("[REDACTED]") == 2 and len(text.splitlines()) == 2


def test_phase_artifacts_when_cn_left_nothing(tmp_path):
    assert plugin.phase_artifacts(agent_spec(), make_ctx(tmp_path)) == {}


def _outputs(tmp_path: Path, *, status="ok", exit_code=0, session: Path | None = None, stderr: bytes = b""):
    out, err = tmp_path / "measured.stdout", tmp_path / "measured.stderr"
    out.write_bytes(b"stdout answer\n")
    err.write_bytes(stderr)
    extra = {"session.json": session} if session else {}
    return PhaseCapture(out, err, ProcessResult(status=status, exit_code=exit_code), extra=extra)


def test_parse_hook_reads_the_session(tmp_path):
    ctx = make_ctx(tmp_path)
    session = tmp_path / "measured.session.json"
    shutil.copy(SAMPLES / "success" / "session.json", session)
    outputs = _outputs(tmp_path, session=session)
    events = plugin.parse_wrapper_events(agent_spec(), ctx, outputs)
    assert [e.event_type for e in events] == ["model_response", "tool_call_start", "tool_call_result", "model_response"]
    assert events[1].raw_artifact_ref.startswith("measured.session.json:")
    assert plugin.final_output_text(agent_spec(), ctx, outputs) == "I created hello.txt containing hello world."


def test_missing_session_after_clean_exit_is_a_parse_error(tmp_path):
    with pytest.raises(WrapperParseError, match="no session file"):
        plugin.parse_wrapper_events(agent_spec(), make_ctx(tmp_path), _outputs(tmp_path))


def test_garbage_session_after_clean_exit_is_a_parse_error(tmp_path):
    bad = tmp_path / "measured.session.json"
    bad.write_bytes(b'{"history": [trunc')
    with pytest.raises(WrapperParseError, match="not a continue session"):
        plugin.parse_wrapper_events(agent_spec(), make_ctx(tmp_path), _outputs(tmp_path, session=bad))


def test_failed_run_without_session_gives_the_stderr_error(tmp_path):
    """HTTP errors leave no session: not a harness problem, the error is an event."""
    stderr = (SAMPLES / "http500_plain" / "stderr.txt").read_bytes()
    ctx = make_ctx(tmp_path)
    outputs = _outputs(tmp_path, status="nonzero_exit", exit_code=1, stderr=stderr)
    (event,) = plugin.parse_wrapper_events(agent_spec(), ctx, outputs)
    assert event.status == "error" and event.payload["http_status"] == 500
    assert plugin.final_output_text(agent_spec(), ctx, outputs) == "stdout answer"
    bad = tmp_path / "measured.session.json"
    bad.write_bytes(b"\x00\xff")
    assert len(plugin.parse_wrapper_events(agent_spec(), ctx, _outputs(
        tmp_path, status="timeout", exit_code=None, session=bad, stderr=stderr))) == 1


def test_redacted_log_never_opens_a_fifo_or_follows_a_symlink(tmp_path):
    """cn.log is agent-written: a FIFO there must not block the harness, a symlink must not leak a file."""
    import os

    from gripprobe_continue.plugin import write_redacted_log

    fifo, link, real = tmp_path / "fifo.log", tmp_path / "link.log", tmp_path / "cn.log"
    os.mkfifo(fifo)
    os.symlink("/etc/hostname", link)
    real.write_text("key sk-secret\n")
    assert write_redacted_log(fifo, None) is None
    assert write_redacted_log(link, None) is None
    out = write_redacted_log(real, "sk-secret")
    assert out is not None and "sk-secret" not in out.read_text()
