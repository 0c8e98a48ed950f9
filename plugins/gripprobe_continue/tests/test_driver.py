"""continue's driver: config file, environment, command, kept files, parsing (the kit's fixtures: the real
plugin manager and a phase context laid out like the runner's), and the driver contract."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gripprobe_continue import config
from gripprobe_continue.plugin import LOG_ARTIFACT, SESSION_ARTIFACT, redacted_log
from gripprobe_core.plugin import GENERIC_TOOL_NAMES, BackendSpec, PhaseCapture, ProcessResult, WrapperParseError
from gripprobe_core.testing import DriverContract

SAMPLES = Path(__file__).resolve().parent / "fixtures" / "samples"
SECRET = "sk-gripprobe-test-0123456789abcdef"


class TestContinueContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for continue: its session file and
    redacted log are kept files; end to end, a shell test and a write (cn's Write) against the oracle.
    What is particular to cn end to end is in test_e2e.py."""

    kept_files = (SESSION_ARTIFACT, LOG_ARTIFACT)
    kept_paths = ("home/.continue/sessions/0b5e2a7c-1d2e-4f3a-8b9c-0d1e2f3a4b5c.json", "home/.continue/logs/cn.log")
    e2e_tests = ("shell_pwd", "save_file")


def remote_backend() -> BackendSpec:
    return BackendSpec(id="b", kind="openai-compatible", model_id="m", base_url="http://127.0.0.1:1/v1")


def test_registered_structured_pinned_and_routable(agent_driver, agent_spec):
    assert agent_driver.observability == "structured"
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("npm", "@continuedev/cli", "1.5.47", "cn")
    assert agent_driver.route(agent_spec, remote_backend()).routable is True


def test_cn_tool_names_are_the_common_vocabulary_and_multiedit(agent_driver):
    got = {raw: agent_driver.tool_names.normalize(raw) for raw in ("Read", "Write", "Edit", "List", "Bash", "Fetch")}
    assert got == {raw: GENERIC_TOOL_NAMES.normalize(raw) for raw in got}
    assert got == {"Read": ("read", "read"), "Write": ("write", "write"), "Edit": ("edit", "write"),
                   "List": ("list", "read"), "Bash": ("shell", "execute"), "Fetch": ("fetch", "fetch")}
    # MultiEdit (cn's Edit for models it deems capable) is an edit: a policy denying writes excludes it too
    assert agent_driver.tool_names.normalize("MultiEdit") == ("edit", "write")
    assert agent_driver.tool_names.normalize("Checklist") == ("checklist", "other")
    assert agent_driver.oracle_dialects() == {}  # the generic tools dialect drives Bash/Write/Edit/Read as is


def test_repo_spec_matches_the_plugin(agent_spec):
    assert (agent_spec.id, agent_spec.plugin, agent_spec.executable, agent_spec.version) == (
        "continue", "continue", "cn", "1.5.47")


def test_environment_writes_config_in_home_only(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(api_key=SECRET, base_url="http://127.0.0.1:5555/")
    env = agent_driver.environment(ctx)
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


def test_command(agent_driver, make_phase_ctx, tmp_path):
    exe = tmp_path / "node_modules" / ".bin" / "cn"
    ctx = make_phase_ctx(executable=exe, prompt="-p looks like a flag")
    cmd = agent_driver.command(ctx)
    assert cmd.argv[0] == str(exe)
    assert cmd.argv[1:] == ["-p", "--auto", "--verbose", "--config", str(ctx.home / ".continue" / "config.yaml"),
                            "--", "-p looks like a flag"]
    assert cmd.stdin is None and cmd.cwd is None  # stdin /dev/null, cwd = workspace
    bare = dataclasses.replace(ctx, agent_executable=None)  # not installed: the spec's executable
    assert agent_driver.command(bare).argv[0] == "cn"


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


def test_artifacts_newest_session_and_redacted_log(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(api_key=SECRET)
    _home_with_run(ctx, key_in_log=SECRET)
    before = sorted(p.relative_to(ctx.home) for p in ctx.home.rglob("*"))
    found = agent_driver.artifacts(ctx)
    assert found["session.json"].name == "22222222-new.json"
    text = found["cn.log"].decode("utf-8")  # the redacted copy, as bytes: HOME is never written to
    assert SECRET not in text and text.count("[REDACTED]") == 2 and len(text.splitlines()) == 2
    assert sorted(p.relative_to(ctx.home) for p in ctx.home.rglob("*")) == before


def test_artifacts_when_cn_left_nothing(agent_driver, phase_ctx):
    assert agent_driver.artifacts(phase_ctx) == {}


def _capture(tmp_path: Path, *, status="ok", exit_code=0, session: Path | None = None, stderr: bytes = b""):
    out, err = tmp_path / "measured.stdout", tmp_path / "measured.stderr"
    out.write_bytes(b"stdout answer\n")
    err.write_bytes(stderr)
    files = {"session.json": session} if session else {}
    return PhaseCapture(out, err, ProcessResult(status=status, exit_code=exit_code), files=files)


def test_parse_reads_the_session(agent_driver, phase_ctx, tmp_path):
    session = tmp_path / "measured.session.json"
    shutil.copy(SAMPLES / "success" / "session.json", session)
    transcript = agent_driver.parse(phase_ctx, _capture(tmp_path, session=session))
    events = transcript.events
    assert [e.event_type for e in events] == ["model_response", "tool_call_start", "tool_call_result", "model_response"]
    assert events[1].raw_artifact_ref.startswith("measured.session.json:")
    assert transcript.final_text == "I created hello.txt containing hello world."


def test_missing_session_after_clean_exit_is_a_parse_error(agent_driver, phase_ctx, tmp_path):
    with pytest.raises(WrapperParseError, match="no session file"):
        agent_driver.parse(phase_ctx, _capture(tmp_path))


def test_garbage_session_after_clean_exit_is_a_parse_error(agent_driver, phase_ctx, tmp_path):
    bad = tmp_path / "measured.session.json"
    bad.write_bytes(b'{"history": [trunc')
    with pytest.raises(WrapperParseError, match="not a continue session"):
        agent_driver.parse(phase_ctx, _capture(tmp_path, session=bad))


def test_failed_run_without_session_gives_the_stderr_error(agent_driver, phase_ctx, tmp_path):
    """HTTP errors leave no session: not a harness problem, the error is an event."""
    stderr = (SAMPLES / "http500_plain" / "stderr.txt").read_bytes()
    transcript = agent_driver.parse(phase_ctx, _capture(tmp_path, status="nonzero_exit", exit_code=1, stderr=stderr))
    (event,) = transcript.events
    assert event.status == "error" and event.payload["http_status"] == 500
    assert transcript.final_text == "stdout answer"
    bad = tmp_path / "measured.session.json"
    bad.write_bytes(b"\x00\xff")
    assert len(agent_driver.parse(phase_ctx, _capture(
        tmp_path, status="timeout", exit_code=None, session=bad, stderr=stderr)).events) == 1


def test_redacted_log_never_opens_a_fifo_or_follows_a_symlink(make_phase_ctx, tmp_path):
    """cn.log is agent-written: a FIFO there must not block the harness, a symlink (the log, or its logs
    folder) must not leak a host file, and nothing is written beside it."""
    ctx = make_phase_ctx(api_key="sk-secret")
    logs = ctx.home / ".continue" / "logs"
    logs.mkdir(parents=True)
    host = tmp_path / "host"
    host.mkdir()
    (host / "cn.log").write_text("host canary\n")
    os.mkfifo(logs / "cn.log")
    assert redacted_log(ctx) is None
    (logs / "cn.log").unlink()
    os.symlink(host / "cn.log", logs / "cn.log")
    assert redacted_log(ctx) is None
    (logs / "cn.log").unlink()
    logs.rmdir()
    os.symlink(host, logs)
    assert redacted_log(ctx) is None
    assert sorted(os.listdir(host)) == ["cn.log"], "written through the linked logs folder"
    logs.unlink()
    logs.mkdir()
    (logs / "cn.log").write_text("key sk-secret\n")
    out = redacted_log(ctx)
    assert out is not None and b"sk-secret" not in out and os.listdir(logs) == ["cn.log"]
