"""The driver contract: what every agent driver must do, as a test class a plugin's tests subclass.

::

    from gripprobe_core.testing import DriverContract

    class TestMyDriverContract(DriverContract):
        kept_files = ("session.jsonl",)      # names your driver's ``artifacts`` gives (fed random bytes)

The agent comes from the ``gripprobe_agent`` ini option (see :mod:`gripprobe_core.testing.pytest_plugin`).
The unit part checks the driver's shape (``calls_off_wire`` entries, if any, each with its reason), its
environment and command, that parsing never raises anything but ``WrapperParseError`` on arbitrary bytes,
its tool names and dialects, and that the files it keeps never follow a link: at every folder on the way
to each file its ``artifacts`` keeps (:attr:`kept_paths`, and whatever it names in a fresh phase) the
contract plants a symlink to a host folder holding a canary, runs the harness's keep step and the driver's
``parse``, and fails when the canary was kept or anything was written into the host folder. The
end-to-end part (marked
``e2e``) installs the agent at its pinned version and runs it through the real ``gripprobe run`` against
the oracle: ``oracle-perfect`` must PASS and ``oracle-lazy`` must be NO_TOOL_CALL on :attr:`e2e_tests`;
for an agent whose tool calls are structured with ids, the driver must report exactly the calls the
oracle asked for; and the same link check at the very places the real agent left the files it kept.
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
    kept_paths: ClassVar[tuple[str, ...]] = ()
    """Where the agent leaves the files ``artifacts`` keeps, relative to the phase: ``home/…``, ``workspace/…``
    or ``tmpdir/…`` (``home/.local/share/myagent/log/run.log``), for the measured phase. The link check plants
    a symlinked folder at each level of each; files ``artifacts`` names in a fresh phase are checked too."""
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
        assert not hasattr(agent_driver, "wire_formats"), (
            "wire_formats is gone (gripprobe-core 0.2) and nothing reads it: the wire witnesses every format; "
            "name the formats in which the agent runs calls the wire carries only as text in calls_off_wire")
        unknown = set(agent_driver.calls_off_wire) - {EVERY_FORMAT, *agent_spec.formats}
        assert not unknown, f"calls_off_wire names formats the agent spec does not declare: {sorted(unknown)}"

    def test_model_aliases_are_plain_model_names(self, agent_driver: Any, make_phase_ctx: Any) -> None:
        """``model_aliases`` (optional: other names the agent sends for side requests configured to the same
        model) are non-empty strings; the recording proxy refuses a model call naming anything else."""
        aliases = getattr(agent_driver, "model_aliases", None)
        if aliases is None:
            return
        got = list(aliases(make_phase_ctx()))
        assert all(isinstance(a, str) and a.strip() and a == a.strip() for a in got), got

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
        if command.session is not None:  # the session sends the prompt (its e2e run shows the agent got it)
            assert command.stdin is None
            return
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

    # ---------------------------------------------------------------------------- kept files, links

    def test_kept_files_never_follow_a_link(self, agent_driver: Any, agent_spec: Any, tmp_path: Path) -> None:
        """A symlink to a host folder at any folder on the way to a kept file (or the file itself): nothing
        from the host folder is kept or parsed, nothing is written into it. Without links, every file of
        :attr:`kept_paths` is kept (so the check can fail)."""
        named = _named_in_a_fresh_phase(agent_driver, agent_spec, tmp_path / "fresh")
        samples = {rel: _sample(rel) for rel in sorted({*self.kept_paths, *named})}
        if self.kept_files and not samples:
            pytest.fail("the driver keeps files (kept_files) but the contract does not know where its agent leaves "
                        "them: set kept_paths (e.g. 'home/.myagent/session.jsonl')", pytrace=False)
        check_kept_files_never_follow_a_link(agent_driver, agent_spec, samples, tmp_path)

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

    @pytest.mark.e2e
    def test_kept_files_of_a_real_run_never_follow_a_link(self, contract_run: Path, agent_driver: Any,
                                                          agent_spec: Any, tmp_path: Path) -> None:
        """The link check at the places the real agent left the files the run kept (``kept_from`` in its
        ``measured.context.json``), each with the real content."""
        import json

        checked = 0
        for ctx_file in sorted((contract_run / "cases").glob("*__oracle-perfect__*/artifacts/measured.context.json")):
            record = json.loads(ctx_file.read_bytes())
            samples = {rel: (ctx_file.parent / f"measured.{name}").read_bytes()
                       for name, rel in (record.get("kept_from") or {}).items()
                       if rel not in ("bytes", "harness") and "\\" not in rel}
            # (a name shown escaped cannot be replayed exactly; a session's record is the harness's own)
            if samples:  # one case at a time: a driver may keep only the newest of several sessions
                check_kept_files_never_follow_a_link(agent_driver, agent_spec, samples, tmp_path / f"case{checked}")
                checked += 1
        if not checked:
            pytest.skip("the real run kept no file from the agent's folders")


# ------------------------------------------------------------------------------- the link check

LINK_CANARY = "gpcanary-contract-host-7c1d9e"


def _sample(rel: str) -> bytes:
    """What a planted file holds: one JSON line naming where it is (a driver may look inside)."""
    return f'{{"gripprobe_contract": "{rel}"}}\n'.encode()


def _named_in_a_fresh_phase(driver: Any, agent: Any, base: Path) -> set[str]:
    """The files ``artifacts`` names in a fresh phase (after ``environment``), as ``home/…`` paths."""
    from ..agentfiles import locate
    from ..store.trees import Refused
    from .helpers import phase_context

    ctx = phase_context(base, agent)
    driver.environment(ctx)
    out = set()
    for src in dict(driver.artifacts(ctx) or {}).values():
        if isinstance(src, (str, os.PathLike)):
            try:
                label, _folder, names = locate(ctx, src)
            except Refused:
                continue
            if names:
                out.add("/".join([label, *names]))
    return out


def check_kept_files_never_follow_a_link(driver: Any, agent: Any, samples: dict[str, bytes], base: Path) -> None:
    """The link check of :class:`DriverContract` for ``samples`` (``home/…`` path → content): first with no
    link (every sample's content must be kept), then once per folder level of each sample path (and the
    file itself) replaced by a symlink to a host folder that mirrors what lies below it, with a canary."""
    control = _keep_and_parse(driver, agent, samples, base / "control", link=None)
    missing = [rel for rel, data in samples.items() if not any(data.strip() in kept for kept in control.kept)]
    assert not missing, f"without any link the driver did not keep {missing}: is kept_paths where its agent leaves them?"
    n = 0
    for rel in samples:
        parts = rel.split("/")
        for level in range(2, len(parts) + 1):
            n += 1
            got = _keep_and_parse(driver, agent, samples, base / f"planted{n}", link="/".join(parts[:level]))
            leaked = [name for name, data in got.kept_by_name.items() if LINK_CANARY.encode() in data]
            assert not leaked, f"with {got.link} a symlink to a host folder, the driver kept its canary as {leaked}"
            assert LINK_CANARY not in got.parsed, f"with {got.link} a symlink, parse read the host folder"
            assert got.host_after == got.host_before, (
                f"with {got.link} a symlink to a host folder, something was written into it: "
                f"{sorted(set(got.host_after.items()) ^ set(got.host_before.items()))}")


class _Outcome:
    def __init__(self, link: str | None) -> None:
        self.link = link
        self.kept: list[bytes] = []
        self.kept_by_name: dict[str, bytes] = {}
        self.parsed = ""
        self.host_before: dict[str, bytes | None] = {}
        self.host_after: dict[str, bytes | None] = {}


def _host_tree(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(d) / name
            out[str(p.relative_to(root))] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return out


def _keep_and_parse(driver: Any, agent: Any, samples: dict[str, bytes], base: Path, link: str | None) -> _Outcome:
    """One phase: environment, the agent's files laid out (``link``: that folder a symlink to a host folder
    mirroring what lies below it, canary inside), then ``artifacts``, the harness's keep step, ``parse``."""
    import shutil

    from ..agentfiles import phase_dirs
    from ..errors import WrapperParseError
    from ..phase import PhaseCapture
    from ..runner.evidence import keep_files
    from .helpers import phase_context

    ctx = phase_context(base / "phase", agent)
    driver.environment(ctx)
    roots = {label: Path(p) for label, p in phase_dirs(ctx).items()}
    host = base / "host"
    host.mkdir(parents=True)
    for rel, data in samples.items():
        label, *names = rel.split("/")
        target = roots[label].joinpath(*names)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if link is not None and (rel + "/").startswith(link + "/"):
            mirrored = host.joinpath(*rel[len(link):].strip("/").split("/")) if rel != link else host / "file"
            mirrored.parent.mkdir(parents=True, exist_ok=True)
            mirrored.write_bytes(data.rstrip(b"\n") + f"\n{LINK_CANARY}\n".encode())
    out = _Outcome(link)
    if link is not None:
        label, *names = link.split("/")
        planted = roots[label].joinpath(*names)
        if planted.is_dir() and not planted.is_symlink():
            shutil.rmtree(planted)
        else:
            planted.unlink()
        os.symlink(host / "file" if link in samples else host, planted)
    out.host_before = _host_tree(host)
    kept = keep_files(ctx, dict(driver.artifacts(ctx) or {}), ctx.artifacts_dir)
    out.kept_by_name = {name: path.read_bytes() for name, path in kept.files.items()}
    out.kept = list(out.kept_by_name.values())
    bare = _capture(base / "capture", b"", b"", {})
    capture = PhaseCapture(stdout_path=bare.stdout_path, stderr_path=bare.stderr_path, process=bare.process,
                           files=kept.files)
    try:
        transcript = driver.parse(ctx, capture)
        out.parsed = repr([e.model_dump(mode="json") for e in transcript.events]) + repr(transcript.final_text)
    except WrapperParseError:
        pass
    out.host_after = _host_tree(host)
    return out


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
