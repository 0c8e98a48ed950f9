"""gptme's driver: environment, command, kept files, parsing, registration (the kit's fixtures: the real
plugin manager and a phase context laid out like the runner's)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gripprobe_core.plugin import BackendSpec, PhaseCapture, ProcessResult
from gripprobe_core.testing import DriverContract, repo_specs
from gripprobe_gptme import NAME, PINNED_VERSION
from gripprobe_gptme.config import DUMMY_API_KEY, QUIET_ENV
from gripprobe_core.plugin import SESSION_TRANSCRIPT
from gripprobe_gptme.parse import CONVERSATION_ARTIFACT
from gripprobe_gptme.plugin import EVENTS_ARTIFACT, find_conversation

SAMPLE_LOG = Path(__file__).resolve().parent / "fixtures" / "samples" / "md_success" / "conversation.jsonl"
#: A prompt that starts a line with ``--``: it must still reach gptme as the prompt, not as options.
PROMPT = "Run `pwd` and save it to pwd.txt.\n-- Do not type it."


class TestGptmeContract(DriverContract):
    """What every driver must do (gripprobe_core.testing.DriverContract), for gptme: its conversation log
    and events log are kept files; end to end, a shell test and a write (``save``) in the ``tool`` format
    (the other two formats end to end: test_gptme_e2e.py)."""

    kept_files = (CONVERSATION_ARTIFACT, EVENTS_ARTIFACT)
    kept_paths = ("home/.local/share/gptme/logs/gripprobe-measured-0123456789ab/conversation.jsonl",
                  "home/.local/share/gptme/logs/gripprobe-measured-0123456789ab/events.jsonl")
    e2e_tests = ("shell_pwd", "save_file")
    e2e_format = "tool"


def test_env_points_both_base_url_variables_at_the_phase_url(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(base_url="http://127.0.0.1:5555")  # the recording proxy's root in auto mode
    env = agent_driver.environment(ctx)
    # gptme reads OPENAI_API_BASE first: a stray one in the user's shell would bypass the proxy
    assert env["OPENAI_API_BASE"] == env["OPENAI_BASE_URL"] == "http://127.0.0.1:5555/v1"
    assert env["OPENAI_API_KEY"] == DUMMY_API_KEY
    assert {k: env[k] for k in QUIET_ENV} == QUIET_ENV
    assert env["GPTME_TIKTOKEN_TIMEOUT"] == "0" and env["GPTME_LLM_MAX_RETRIES"] == "2"
    logs = Path(env["GPTME_LOGS_HOME"])
    assert logs.is_dir() and logs.is_relative_to(ctx.home)


def test_the_key_goes_to_the_environment_only(agent_driver, make_phase_ctx, tmp_path):
    key = "sk-canary-gptme-4242"
    ctx = make_phase_ctx(api_key=key)
    env = agent_driver.environment(ctx)
    assert env["OPENAI_API_KEY"] == key
    command = agent_driver.command(ctx)
    assert key not in " ".join(command.argv)
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def test_command_is_the_installed_binary_in_the_cases_format(agent_driver, make_phase_ctx):
    for fmt in ("tool", "markdown", "xml"):
        ctx = make_phase_ctx(fmt=fmt, model_name="lazy", prompt=PROMPT)
        cmd = agent_driver.command(ctx)
        argv = cmd.argv
        assert argv[0] == str(ctx.agent_executable)
        assert argv[argv.index("--tool-format") + 1] == fmt
        assert argv[argv.index("--model") + 1] == "local/lazy"
        assert argv[argv.index("--workspace") + 1] == str(ctx.workspace)
        assert argv[argv.index("--output-format") + 1] == "json" and "--non-interactive" in argv
        assert argv[-2:] == ["--", ctx.prompt]  # the prompt may start with "-" or hold "--"
        assert argv[argv.index("--tools") + 1] == "save,append,patch,shell"  # the spec's default_args
        assert cmd.stdin is None and cmd.cwd is None


def test_every_phase_gets_a_new_conversation_name(agent_driver, phase_ctx):
    """Reusing --name resumes that conversation: never twice the same."""
    names = {(a := agent_driver.command(phase_ctx).argv)[a.index("--name") + 1] for _ in range(5)}
    assert len(names) == 5 and all(n.startswith("gripprobe-measured-") for n in names)


def test_artifacts_are_this_phases_conversation(agent_driver, make_phase_ctx):
    ctx = make_phase_ctx(phase="warmup")
    env = agent_driver.environment(ctx)
    assert agent_driver.artifacts(ctx) == {}
    logs = Path(env["GPTME_LOGS_HOME"])
    for name in ("gripprobe-measured-aaa", "gripprobe-warmup-bbb"):
        (logs / name).mkdir()
        (logs / name / "conversation.jsonl").write_bytes(SAMPLE_LOG.read_bytes())
    (logs / "gripprobe-warmup-bbb" / "events.jsonl").write_text("{}\n")
    # kept as gptme.conversation.jsonl: the bare name is the harness's own session record (SESSION_TRANSCRIPT)
    assert SESSION_TRANSCRIPT not in agent_driver.artifacts(ctx)
    assert agent_driver.artifacts(ctx) == {"gptme.conversation.jsonl": logs / "gripprobe-warmup-bbb" / "conversation.jsonl",
                                           "events.jsonl": logs / "gripprobe-warmup-bbb" / "events.jsonl"}
    assert find_conversation(replace(ctx, phase="measured")) == logs / "gripprobe-measured-aaa" / "conversation.jsonl"


def test_parse_reads_the_kept_conversation_and_the_final_text(agent_driver, make_phase_ctx, tmp_path):
    ctx = make_phase_ctx(fmt="markdown")
    capture = PhaseCapture(stdout_path=tmp_path / "none", stderr_path=tmp_path / "none2",
                           process=ProcessResult(status="ok", exit_code=0), files={"gptme.conversation.jsonl": SAMPLE_LOG})
    transcript = agent_driver.parse(ctx, capture)
    assert {e.source_tier for e in transcript.events} == {"B"}
    assert [e.event_type for e in transcript.events].count("tool_call_start") == 2
    assert transcript.final_text == "The file is created."
    # a run stored before the rename kept it under the bare name: still read
    legacy = PhaseCapture(stdout_path=tmp_path / "none", stderr_path=tmp_path / "none2",
                          process=ProcessResult(status="ok", exit_code=0), files={"conversation.jsonl": SAMPLE_LOG})
    assert agent_driver.parse(ctx, legacy).events == transcript.events


def test_install_recipe_route_and_registration(agent_driver, agent_spec):
    recipe = agent_driver.install_recipe(agent_spec)
    assert (recipe.kind, recipe.package, recipe.version, recipe.executable) == ("pypi", "gptme", "0.35.1", "gptme")
    unpinned = agent_spec.model_copy(update={"version": None})
    assert agent_driver.install_recipe(unpinned).version == "0.35.1"
    decision = agent_driver.route(agent_spec, BackendSpec(id="o", kind="oracle", model_id="perfect"))
    assert decision.routable
    assert agent_driver.observability == "structured"
    # in every format, the tool format too, gptme also runs tool blocks written in the reply text: its log confirms
    assert set(agent_driver.calls_off_wire) == {"*"} and "reply text" in agent_driver.calls_off_wire["*"]


def test_gptmes_own_tool_names_and_dialects(agent_driver):
    names = agent_driver.tool_names
    assert names.normalize("save") == names.normalize("append") == ("write", "write")
    assert names.normalize("patch_many") == names.normalize("patch") == ("edit", "write")
    assert names.normalize("ipython") == ("ipython", "execute") and names.normalize("tmux") == ("tmux", "execute")
    assert names.normalize("shell") == ("shell", "execute") and names.normalize("complete") == ("complete", "other")
    assert list(agent_driver.oracle_dialects()) == ["gptme-tool", "gptme-markdown", "gptme-xml"]


def test_the_repo_spec_matches_the_plugin(agent_spec):
    if repo_specs(Path(__file__)) is None:
        pytest.skip("not inside the GripProbe repository")
    spec = agent_spec
    assert (spec.id, spec.plugin, spec.executable, spec.version) == ("gptme", NAME, "gptme", PINNED_VERSION)
    assert spec.formats == ["tool", "markdown", "xml"] and set(spec.tool_kinds) == {"execute", "read", "write"}
    assert spec.default_args == ["--tools", "save,append,patch,shell"]
