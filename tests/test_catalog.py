"""The test catalog (specs/tests) and run-time templating.

Every spec loads, and every reference solution really solves its test: the reference actions are
performed here (shell through ``bash -c`` in a fresh workspace, write/edit/read in Python, fetches
against a real challenge server) and every validator must pass. An empty workspace, untouched
fixtures and a replay of the warmup phase's facts must all fail.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gripprobe_core.defaults.challenges import BUILTIN_CHALLENGES
from gripprobe_core.defaults.validators import BUILTIN_VALIDATORS
from gripprobe_core import ValidatorContext
from gripprobe_core.models.events import Event
from gripprobe_core.models.results import ValidatorResult
from gripprobe_core.models.specs import (
    FixtureFile, ReferenceEdit, ReferenceRead, ReferenceShell, ReferenceWrite, TestSpec,
)
from gripprobe_core.runvalues import make_run_values, render, render_test, template_vars

ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = ROOT / "specs" / "tests"
SPEC_FILES = sorted(SPEC_DIR.glob("*.yaml"))
SANITY = {"shell_pwd", "shell_date", "shell_file", "python_file_simple", "save_file", "patch_file"}
EXPECTED_IDS = SANITY | {
    "shell_date_de", "shell_date_ru", "python_file", "python_file_de", "python_file_ru", "patch_file_prepared",
    "patch_file_shell", "web_nonce_proof", "web_search_json_ranked", "web_fetch_json_raw", "json_rank_from_file",
    "weekly_plan_next_week", "shell_denied", "save_file_denied",
}


def load(path: Path) -> TestSpec:
    return TestSpec.model_validate(YAML(typ="safe").load(path.read_text(encoding="utf-8")))


CATALOG = {p.stem: load(p) for p in SPEC_FILES}


# ------------------------------------------------------------------------------------ performing a test

def shell_env(home: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}
    if "TZ" in os.environ:
        env["TZ"] = os.environ["TZ"]
    return env


def seed(fixtures: list[FixtureFile], workspace: Path) -> None:
    workspace.mkdir(parents=True, exist_ok=True)
    for fixture in fixtures:
        target = workspace / fixture.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(fixture.content, encoding="utf-8")
        if fixture.mode is not None:
            target.chmod(fixture.mode)


def tool_call(seq: int, name: str, kind: str, arguments: dict[str, Any]) -> Event:
    return Event(event_type="tool_call_start", event_id=f"e{seq}", source_tier="B", source="wrapper",
                 sequence=seq, status="started", payload={"name": name, "kind": kind, "arguments": arguments})


KIND_OF_ACTION = {ReferenceShell: ("shell", "execute"), ReferenceWrite: ("write", "write"),
                  ReferenceEdit: ("edit", "write"), ReferenceRead: ("read", "read")}


def denied(test: TestSpec, action: Any) -> bool:
    """Would the test's own interaction policy refuse this action (done with its natural tool)?"""
    from gripprobe_core.interaction import PermissionRequest, decide

    policy = test.observe.interaction if test.observe is not None else None
    if policy is None:
        return False
    name, kind = KIND_OF_ACTION[type(action)]
    return decide(policy, PermissionRequest("r", "c", raw_name=name, name=name, kind=kind)).outcome == "deny"


def final_words(test: TestSpec) -> str:
    """What an agent that tried its tools under the test's policy would answer: which kinds were refused."""
    from gripprobe_core.interaction import PermissionRequest, decide

    policy = test.observe.interaction if test.observe is not None else None
    refused = [kind for name, kind in KIND_OF_ACTION.values()
               if policy is not None and decide(policy, PermissionRequest("r", "c", raw_name=name, name=name,
                                                                         kind=kind)).outcome == "deny"]
    return f"My {', '.join(dict.fromkeys(refused))} call was denied." if refused else "Done."


def perform(test: TestSpec, workspace: Path) -> list[Event]:
    """Do a rendered test's reference actions the way an agent with shell/read/write/edit would (those the
    test's interaction policy refuses are not done)."""
    events = []
    home = workspace.parent / f"{workspace.name}-home"
    home.mkdir(exist_ok=True)
    for seq, action in enumerate(test.reference, start=1):
        if denied(test, action):
            continue
        if isinstance(action, ReferenceShell):
            proc = subprocess.run(["bash", "-c", action.shell], cwd=workspace, env=shell_env(home),
                                  capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"{test.id}: reference shell failed: {proc.stderr}"
            events.append(tool_call(seq, "shell", "execute", {"command": action.shell}))
        elif isinstance(action, ReferenceWrite):
            target = workspace / action.write.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(action.write.content, encoding="utf-8")
            events.append(tool_call(seq, "write", "write", action.write.model_dump()))
        elif isinstance(action, ReferenceEdit):
            target = workspace / action.edit.path
            text = target.read_text(encoding="utf-8")
            assert text.count(action.edit.old) == 1, f"{test.id}: edit's old text must occur exactly once"
            target.write_text(text.replace(action.edit.old, action.edit.new), encoding="utf-8")
            events.append(tool_call(seq, "edit", "write", action.edit.model_dump()))
        elif isinstance(action, ReferenceRead):
            (workspace / action.read.path).read_text(encoding="utf-8")
            events.append(tool_call(seq, "read", "read", action.read.model_dump()))
    return events


def judge(test: TestSpec, workspace: Path, run_values: dict, facts: dict, requests: list,
          events: list[Event], final_text: str | None = None) -> list[ValidatorResult]:
    ctx = ValidatorContext(workspace=workspace, test=test, run_values=run_values, challenge=facts,
                           challenge_requests=list(requests), events=events, final_text=final_text)
    return [BUILTIN_VALIDATORS[v.kind](ctx, v.model_dump(exclude={"kind"})) for v in test.validators]


async def solve_and_judge(test: TestSpec, tmp: Path) -> dict[str, list[ValidatorResult]]:
    """Run the test like the runner would (warmup and measured servers) and judge several workspaces."""
    run_values = make_run_values()
    servers = {}
    if test.challenge is not None:
        for phase in ("warmup", "measured"):
            servers[phase] = BUILTIN_CHALLENGES[test.challenge.kind](test.challenge.options, phase)
            await servers[phase].start()
    try:
        facts = {phase: dict(s.facts) for phase, s in servers.items()}
        measured_facts = facts.get("measured", {})
        outcomes: dict[str, list[ValidatorResult]] = {}

        # The reference solution in the measured phase.
        ws = tmp / "measured"
        rendered = render_test(test, template_vars(run_values, workspace=ws, challenge_facts=measured_facts))
        for text in [rendered.prompt] + [f.content for f in rendered.fixtures] + \
                [a.model_dump_json() for a in rendered.reference]:
            assert "${" not in text, f"{test.id}: unrendered placeholder in {text[:200]!r}"
        seed(rendered.fixtures, ws)
        events = await asyncio.to_thread(perform, rendered, ws)
        measured_log = servers["measured"].requests if servers else []
        outcomes["reference"] = judge(test, ws, run_values, measured_facts, measured_log, events, final_words(test))

        # An empty workspace, and the fixtures left untouched.
        empty = tmp / "empty"
        empty.mkdir()
        outcomes["empty"] = judge(test, empty, run_values, measured_facts, [], [])
        untouched = tmp / "untouched"
        seed(render_test(test, template_vars(run_values, workspace=untouched,
                                             challenge_facts=measured_facts)).fixtures, untouched)
        outcomes["untouched"] = judge(test, untouched, run_values, measured_facts, [], [])

        # Solved with the warmup phase's facts, judged as the measured phase.
        if servers:
            replay = tmp / "replay"
            rendered = render_test(test, template_vars(run_values, workspace=replay,
                                                       challenge_facts=facts["warmup"]))
            seed(rendered.fixtures, replay)
            replay_events = await asyncio.to_thread(perform, rendered, replay)
            assert servers["warmup"].requests, "the replay must have fetched from the warmup server"
            outcomes["replay"] = judge(test, replay, run_values, measured_facts,
                                       servers["measured"].requests[len(measured_log):], replay_events)
        return outcomes
    finally:
        for server in servers.values():
            await server.stop()


@pytest.mark.parametrize("test_id", sorted(CATALOG))
def test_reference_solution_passes_and_shortcuts_fail(test_id: str, tmp_path: Path) -> None:
    test = CATALOG[test_id]
    outcomes = asyncio.run(solve_and_judge(test, tmp_path))
    for result in outcomes["reference"]:
        assert result.passed, f"{test_id}: {result.kind}: {result.message}\nexpected: {result.expected}\n" \
                              f"observed: {result.observed}"
    for name in ("empty", "untouched", "replay"):
        if test.observe is not None:  # a denial test: doing nothing is half the answer; saying so the other half
            assert not all(r.passed for r in outcomes.get(name, [])) or name not in outcomes, (test_id, name)
            continue
        for result in outcomes.get(name, []):
            assert not result.passed, f"{test_id}: {result.kind} passed on the {name} workspace"
    # A judged file points at the reference action that produced it, when an action names it
    # (``patch -p1 < fix.patch`` names only the patch, so greet.py has no source).
    actions = [a.model_dump_json() for a in test.reference]
    for spec, result in zip(test.validators, outcomes["reference"]):
        path = (spec.model_extra or {}).get("path")
        if path is None or spec.kind == "file_absent":  # nothing there: nothing produced it
            continue
        named = [i for i, a in enumerate(actions, start=1) if Path(path).name in a]
        if named:
            assert result.source is not None and result.source.sequence in named, (test_id, result.kind)
            assert result.source.field_path == f"file:{path}"
        else:
            assert result.source is None, (test_id, result.kind)


# ------------------------------------------------------------------------------------- catalog shape

def test_catalog_is_complete_and_ids_match_file_names() -> None:
    assert set(CATALOG) == EXPECTED_IDS
    for stem, test in CATALOG.items():
        assert test.id == stem


def test_sanity_set() -> None:
    assert {t.id for t in CATALOG.values() if "sanity" in t.tags} == SANITY
    for test in CATALOG.values():
        assert ("sanity" in test.tags) != ("non_sanity" in test.tags), test.id


def test_variants_translate_an_existing_test() -> None:
    for test in CATALOG.values():
        assert ("multilingual" in test.tags) == (test.variant_of is not None) == (test.language != "en"), test.id
        if test.variant_of:
            original = CATALOG[test.variant_of]
            assert original.language == "en" and original.variant_of is None
            assert test.validators == original.validators and test.requires == original.requires
            assert test.prompt != original.prompt


def test_challenges_web_tags_and_placeholders() -> None:
    for test in CATALOG.values():
        assert ("web" in test.tags) == (test.challenge is not None), test.id
        if test.challenge is not None:
            assert test.challenge.kind in BUILTIN_CHALLENGES
            assert "${challenge_" in test.prompt, f"{test.id}: the prompt must carry the per-phase URL"


def test_validator_options_parse() -> None:
    for test in CATALOG.values():
        for v in test.validators:
            assert v.kind in BUILTIN_VALIDATORS, (test.id, v.kind)
            BUILTIN_VALIDATORS[v.kind].options_model.model_validate(v.model_dump(exclude={"kind"}))


def test_catalog_docs_list_every_test() -> None:
    text = (ROOT / "docs" / "test-catalog.md").read_text(encoding="utf-8")
    for test in CATALOG.values():
        assert f"| `{test.id}` |" in text, f"docs/test-catalog.md lacks {test.id}"


def test_bad_spec_is_rejected() -> None:
    data = YAML(typ="safe").load((SPEC_DIR / "shell_pwd.yaml").read_text())
    data["promt"] = "typo"
    with pytest.raises(ValueError):
        TestSpec.model_validate(data)


# --------------------------------------------------------------------------------------- run context

@pytest.mark.parametrize("now, today, weekday, monday, next_monday", [
    (datetime(2025, 3, 12, 10, 0), "2025-03-12", "Wednesday", "2025-03-10", "2025-03-17"),
    (datetime(2025, 3, 16, 23, 59), "2025-03-16", "Sunday", "2025-03-10", "2025-03-17"),
    (datetime(2025, 3, 17, 0, 0), "2025-03-17", "Monday", "2025-03-17", "2025-03-24"),
    (datetime(2025, 12, 31, 12, 0), "2025-12-31", "Wednesday", "2025-12-29", "2026-01-05"),
])
def test_run_values_dates(now: datetime, today: str, weekday: str, monday: str, next_monday: str) -> None:
    ctx = make_run_values(now)
    assert (ctx["today"], ctx["weekday"], ctx["this_week_monday"], ctx["next_week_monday"]) == (
        today, weekday, monday, next_monday)
    assert ctx["next_week_heading"] == f"Week of {next_monday}"
    assert ctx["this_week_heading"] == f"Week of {monday}"
    assert all(isinstance(v, str) for v in ctx.values())


def test_run_values_defaults_to_the_local_date() -> None:
    before = datetime.now().astimezone().date().isoformat()
    today = make_run_values()["today"]
    after = datetime.now().astimezone().date().isoformat()
    assert today in (before, after)  # a run may straddle midnight


def test_render_fills_only_braced_known_names() -> None:
    variables = {"today": "2025-03-12", "x": "X"}
    text = "${today} $today $HOME ${HOME} $(pwd) $$ $${today} ${unknown} ${x}${x} $"
    assert render(text, variables) == "2025-03-12 $today $HOME ${HOME} $(pwd) $$ ${today} ${unknown} XX $"


def test_template_vars_flatten_facts() -> None:
    variables = template_vars({"today": "2025-03-12"}, workspace=Path("/w/measured"),
                              challenge_facts={"url": "http://h/x", "answer": {"url": "u", "id": "r-1"}, "n": 3})
    assert variables == {"today": "2025-03-12", "workspace": "/w/measured", "challenge_url": "http://h/x",
                         "challenge_answer": '{"id":"r-1","url":"u"}', "challenge_n": "3"}
    assert template_vars({}, workspace="/w", challenge_facts=None) == {"workspace": "/w"}


def test_render_test_leaves_validators_alone() -> None:
    test = CATALOG["weekly_plan_next_week"]
    rendered = render_test(test, template_vars(make_run_values(datetime(2025, 3, 12)), workspace="/w",
                                               challenge_facts={}))
    assert "## Week of 2025-03-17" in rendered.fixtures[0].content
    assert "Week of 2025-03-17" in rendered.reference[1].edit.old
    assert rendered.validators == test.validators
    assert "${next_week_heading}" in test.fixtures[0].content  # the original is not modified
