"""The driver contract: what every agent driver must do, as a test class a plugin's tests subclass.

::

    from gripprobe_core.testing import DriverContract

    class TestMyDriverContract(DriverContract):
        kept_files = ("session.jsonl",)      # names your driver's ``artifacts`` gives (fed random bytes)

The agent comes from the ``gripprobe_agent`` ini option (see :mod:`gripprobe_core.testing.pytest_plugin`).
The unit part checks the driver's shape (``calls_off_wire`` entries, if any, each with its reason), its
environment and command, that parsing never raises anything
but ``WrapperParseError`` on arbitrary bytes, its tool names and dialects. The end-to-end part (marked
``e2e``) installs the agent at its pinned version and runs it through the real ``gripprobe run`` against
the oracle: ``oracle-perfect`` must PASS and ``oracle-lazy`` must be NO_TOOL_CALL on :attr:`e2e_tests`;
for an agent whose tool calls are structured with ids, the driver must report exactly the calls the
oracle asked for.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

CANARY_KEY = "sk-gripprobe-contract-canary-0123456789"


class DriverContract:
    """Subclass as ``Test…`` in a plugin's tests; override the class attributes that differ."""

    kept_files: ClassVar[tuple[str, ...]] = ()
    """Names of the files the driver's ``artifacts`` asks to keep; the parse tests feed them random bytes."""
    e2e_tests: ClassVar[tuple[str, ...]] = ("shell_pwd",)
    """Tests run end to end against oracle-perfect (PASS) and oracle-lazy (NO_TOOL_CALL)."""
    e2e_format: ClassVar[str | None] = None
    """The format of the end-to-end run (default: the agent spec's first)."""
    reports_call_ids: ClassVar[bool] = True
    """Its tool calls are structured, with the model's call ids: the driver's tier-B starts must be exactly
    the oracle's calls, in order. False for agents whose edits are reply text (aider): then its successful
    edits must name exactly the files the test's reference writes or edits (``e2e_tests`` should write)."""

    # --------------------------------------------------------------------------------- shape

    def test_driver_is_registered_under_its_name(self, agent_driver: Any, agent_name: str) -> None:
        from ..drivers import AgentDriver

        assert isinstance(agent_driver, AgentDriver)
        assert agent_driver.name == agent_name
        assert agent_driver.observability in ("structured", "markers", "none")
        assert isinstance(agent_driver.description, str) and agent_driver.description.strip()

    def test_calls_off_the_wire_say_why(self, agent_driver: Any, agent_spec: Any) -> None:
        """``calls_off_wire`` (formats in which the agent's own log may confirm calls the wire never carried)
        names formats of the agent's spec, or ``"*"``, each with a reason; empty is the safe default."""
        from ..drivers import EVERY_FORMAT, calls_off_wire_problems

        assert calls_off_wire_problems(agent_driver) == []
        unknown = set(agent_driver.calls_off_wire) - {EVERY_FORMAT, *agent_spec.formats}
        assert not unknown, f"calls_off_wire names formats the agent spec does not declare: {sorted(unknown)}"

    def test_install_recipe_pins_an_exact_version(self, agent_driver: Any, agent_spec: Any) -> None:
        recipe = agent_driver.install_recipe(agent_spec)
        if recipe is None:
            return
        assert recipe.kind in ("pypi", "npm") and recipe.package and recipe.executable
        assert recipe.version and not any(c in recipe.version for c in "<>=~^*, ")

    # ---------------------------------------------------------------------- environment and command

    def test_environment_and_config_files_stay_in_the_phase(self, agent_driver: Any, make_phase_ctx: Any,
                                                            tmp_path: Path) -> None:
        """Strings only; files written only under the phase's HOME (and XDG dirs); the API key never on
        the command line."""
        ctx = make_phase_ctx(api_key=CANARY_KEY)
        before = _tree(tmp_path, skip=ctx.home)
        env = dict(agent_driver.environment(ctx))
        command = agent_driver.command(ctx)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()), env
        assert _tree(tmp_path, skip=ctx.home) == before, "the driver wrote outside the phase's HOME"
        assert isinstance(command.argv, list) and command.argv and all(isinstance(a, str) for a in command.argv)
        assert not any(CANARY_KEY in a for a in command.argv), "the API key is on the command line"
        for name in ("HOME", "TMPDIR", "PATH"):
            assert name not in env, f"{name} is the runner's to set"

    def test_command_starts_the_installed_agent_and_carries_the_prompt(self, agent_driver: Any,
                                                                       make_phase_ctx: Any) -> None:
        ctx = make_phase_ctx(prompt="Say the word gripprobe-contract-prompt and nothing else.")
        command = agent_driver.command(ctx)
        if ctx.agent_executable is not None and agent_driver.install_recipe(ctx.agent) is not None:
            assert command.argv[0] == str(ctx.agent_executable)
        carried = " ".join(command.argv) + (command.stdin or b"").decode("utf-8", "replace")
        assert "gripprobe-contract-prompt" in carried

    # ------------------------------------------------------------------------------------ parsing

    def test_parse_of_empty_outputs(self, agent_driver: Any, make_phase_ctx: Any, tmp_path: Path) -> None:
        _parse_or_parse_error(agent_driver, make_phase_ctx(), _capture(tmp_path, b"", b"", {}))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(stdout=st.binary(max_size=2048), stderr=st.binary(max_size=512),
           lines=st.lists(st.sampled_from([b"{}", b"[]", b'{"type":', b"null", b'{"role":"assistant"}', b"\xff\xfe",
                                           b'{"type":"tool_use","part":{}}', b"\n", b"\x00"]), max_size=8))
    def test_parse_never_raises_but_a_parse_error_on_any_bytes(self, agent_driver: Any, make_phase_ctx: Any,
                                                               stdout: bytes, stderr: bytes, lines: list[bytes]) -> None:
        ctx = make_phase_ctx()
        with tempfile.TemporaryDirectory() as d:
            body = stdout + b"\n" + b"\n".join(lines)
            capture = _capture(Path(d), body, stderr, {n: body for n in self.kept_files})
            _parse_or_parse_error(agent_driver, ctx, capture)

    def test_tool_names_have_known_kinds(self, agent_driver: Any) -> None:
        from ..models.specs import TOOL_KINDS
        from ..telemetry.toolnames import ToolNames

        assert isinstance(agent_driver.tool_names, ToolNames)
        for key, (name, kind) in agent_driver.tool_names.entries().items():
            assert key and name and kind in TOOL_KINDS, (key, name, kind)

    def test_oracle_dialects_speak_the_dialect_protocol(self, agent_driver: Any) -> None:
        from ..oracle.dialects import Dialect

        for name, dialect in dict(agent_driver.oracle_dialects()).items():
            assert isinstance(name, str) and name and isinstance(dialect, Dialect), name

    # --------------------------------------------------------------------------------- end to end

    @pytest.fixture(scope="class")
    @classmethod
    def contract_run(cls, e2e_run: Any) -> Path:
        """The real ``gripprobe run`` of the agent × oracle-perfect/lazy × :attr:`e2e_tests` (the kit's
        ``e2e_run``: your own tests asking for the same run share it)."""
        return Path(e2e_run(*cls.e2e_tests, fmt=cls.e2e_format))

    @pytest.mark.e2e
    def test_against_the_oracle_perfect_passes_and_lazy_is_no_tool_call(self, contract_run: Path) -> None:
        from .helpers import read_cases

        got = {(c["key"]["model"], c["key"]["test"]): c["verdict"]["status"] for c in read_cases(contract_run).values()}
        want = {("oracle-perfect", t): "PASS" for t in self.e2e_tests} | {
            ("oracle-lazy", t): "NO_TOOL_CALL" for t in self.e2e_tests}
        assert got == want

    @pytest.mark.e2e
    def test_the_driver_reports_the_calls_the_oracle_asked_for(self, contract_run: Path, agent_driver: Any,
                                                              gripprobe_plugins: Any) -> None:
        """Read back through the driver alone (tier A aside), every perfect case reports what the oracle
        had the agent do: with call ids, exactly the oracle's calls in order; for an agent whose edits are
        reply text (no tool calls on the wire), a successful edit of exactly the files the test's reference
        writes or edits."""
        from ..models.specs import ReferenceEdit, ReferenceWrite
        from .helpers import read_jsonl, stored_phase, stored_transcript

        for case_dir in sorted((contract_run / "cases").glob("*__oracle-perfect__*")):
            truth = read_jsonl(case_dir / "artifacts" / "oracle.measured.jsonl")
            events = stored_transcript(case_dir, "measured", gripprobe_plugins).events
            if self.reports_call_ids:
                starts = [e for e in events if e.event_type == "tool_call_start"]
                assert truth and starts, case_dir.name
                assert [t["tool_call_id"] for t in truth] == [e.tool_call_id for e in starts], case_dir.name
                continue
            ctx, _ = stored_phase(case_dir, "measured")
            want = {a.write.path if isinstance(a, ReferenceWrite) else a.edit.path
                    for a in ctx.test.reference if isinstance(a, (ReferenceWrite, ReferenceEdit))}
            results = [e for e in events if e.event_type == "tool_call_result"]
            touched = {(e.payload.get("arguments") or {}).get("path") for e in results
                       if isinstance(e.payload.get("arguments"), dict)}
            assert want and touched == want, (case_dir.name, touched, want)
            assert {e.status for e in results} == {"success"}, case_dir.name


def _capture(d: Path, stdout: bytes, stderr: bytes, files: dict[str, bytes]) -> Any:
    from ..models.results import ProcessResult
    from ..phase import PhaseCapture

    d.mkdir(parents=True, exist_ok=True)
    (d / "measured.stdout").write_bytes(stdout)
    (d / "measured.stderr").write_bytes(stderr)
    kept = {}
    for name, data in files.items():
        (d / f"measured.{name}").write_bytes(data)
        kept[name] = d / f"measured.{name}"
    return PhaseCapture(stdout_path=d / "measured.stdout", stderr_path=d / "measured.stderr",
                        process=ProcessResult(status="ok", exit_code=0), files=kept)


def _parse_or_parse_error(driver: Any, ctx: Any, capture: Any) -> None:
    from ..errors import WrapperParseError
    from ..phase import Transcript

    try:
        got = driver.parse(ctx, capture)
    except WrapperParseError:
        return
    assert isinstance(got, Transcript)
    assert got.final_text is None or isinstance(got.final_text, str)
    for e in got.events:
        assert e.source_tier in ("B", "C") and e.phase == ctx.phase


def _tree(root: Path, *, skip: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            dirs[:] = []
            continue
        for name in files:
            p = Path(dirpath) / name
            out[str(p)] = p.stat().st_size
    return out
