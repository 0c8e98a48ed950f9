"""Checks that span files: ids that suites, cases, policies and variants refer to, and (given a plugin
registry) agent plugin names; plus, per test file, the validator and challenge kinds that must be
installed and the validators' options (:func:`check_test_plugins`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from pydantic import BaseModel, ValidationError

from ..models.specs import KNOWN_TAGS
from .error_map import issues_from_validation
from .issues import KeyPath, SpecIssue, format_key_path, make_issue, short_list, suggest
from .yaml_source import SourceMap

if TYPE_CHECKING:
    from .loader import SpecSet

TAGS: tuple[str, ...] = tuple(KNOWN_TAGS)
"""The tags the shipped specs use (tags are free; a suite's ``tag:`` must name a tag some test carries)."""
TAG_PREFIX = "tag:"


@dataclass
class KnownIds:
    """Every id seen per kind, including ids of files that failed validation (so that one broken
    file does not also make every reference to it an error)."""

    first: dict[tuple[str, str], tuple[Path, int]] = field(default_factory=dict)
    unreadable: set[tuple[str, str]] = field(default_factory=set)

    def add(self, kind: str, spec_id: str, path: Path, line: int) -> tuple[Path, int] | None:
        """Record ``spec_id``; return where it was first defined if it is a duplicate."""
        key = (kind, spec_id)
        if key in self.first:
            return self.first[key]
        self.first[key] = (path, line)
        return None

    def ids(self, kind: str) -> set[str]:
        return {i for k, i in self.first if k == kind} | {i for k, i in self.unreadable if k == kind}


def check_references(specs: "SpecSet", known: KnownIds, registry: Any = None) -> list[SpecIssue]:
    """Issues for every dangling reference among the valid specs in ``specs``."""
    issues: list[SpecIssue] = []
    report = _Reporter(specs, issues)
    agent_ids = known.ids("cli_agent")
    model_ids = known.ids("model")
    test_ids = known.ids("test")

    for model in specs.models.values():
        seen: set[str] = set()
        for i, backend in enumerate(model.backends):
            if backend.id in seen:
                report("model", model.id, ("backends", i, "id"), f"duplicate backend id {backend.id!r}")
            seen.add(backend.id)
        # A policy for an agent this tree does not define is harmless ("if you run aider, use 20 s"): spec
        # trees are often subsets. It is a note, so a misspelt id still gets pointed out.
        notes = _Reporter(specs, specs.notes)
        for agent in model.policy.agents:
            notes.unknown("model", model.id, ("policy", "agents", agent), "agent", agent, agent_ids)

    for test in specs.tests.values():
        if test.variant_of is not None:
            if test.variant_of == test.id:
                report("test", test.id, ("variant_of",), "a test cannot be a variant of itself")
            else:
                report.unknown("test", test.id, ("variant_of",), "test", test.variant_of, test_ids)

    for suite in specs.suites.values():
        _check_suite(report, specs, suite, agent_ids, model_ids, test_ids)

    if registry is not None:
        _check_plugins(report, specs, registry)
    return issues


def _check_suite(report: "_Reporter", specs: "SpecSet", suite: Any, agent_ids: set[str], model_ids: set[str],
                 test_ids: set[str]) -> None:
    all_tests_loaded = test_ids == set(specs.tests)  # else a broken test file may carry the tag
    for i, agent in enumerate(suite.agents):
        report.unknown("suite", suite.id, ("agents", i), "agent", agent, agent_ids)
    for i, model in enumerate(suite.models):
        report.unknown("suite", suite.id, ("models", i), "model", model, model_ids)
    for i, test in enumerate(suite.tests):
        if test.startswith(TAG_PREFIX):
            tag = test[len(TAG_PREFIX):]
            # Tags are free, so "unknown" means no test carries it (unless a broken test file might).
            if all_tests_loaded and not specs.tests_tagged(tag):
                in_use = sorted({t for test_spec in specs.tests.values() for t in test_spec.tags})
                close = suggest(tag, in_use)
                hint = f"did you mean 'tag:{close}'? " if close else ""
                report("suite", suite.id, ("tests", i),
                       f"no test has tag {tag!r}; {hint}tags in use: {short_list(in_use)}")
        else:
            report.unknown("suite", suite.id, ("tests", i), "test", test, test_ids)
    suite_agents = [specs.agents[a] for a in suite.agents if a in specs.agents]
    if suite_agents and len(suite_agents) == len(suite.agents):
        offered = {f for a in suite_agents for f in a.formats}
        for i, fmt in enumerate(suite.formats):
            if fmt not in offered:
                report("suite", suite.id, ("formats", i),
                       f"format {fmt!r} is not supported by any agent of this suite "
                       f"(they support: {short_list(offered)})")
    for i, case in enumerate(suite.cases):
        where = ("cases", i)
        report.unknown("suite", suite.id, where + ("agent",), "agent", case.agent, agent_ids)
        report.unknown("suite", suite.id, where + ("model",), "model", case.model, model_ids)
        report.unknown("suite", suite.id, where + ("test",), "test", case.test, test_ids)
        agent = specs.agents.get(case.agent)
        if agent is not None and case.format not in agent.formats:
            report("suite", suite.id, where + ("format",),
                   f"agent {agent.id!r} does not support format {case.format!r} "
                   f"(it supports: {short_list(agent.formats)})")
        model = specs.models.get(case.model)
        if model is not None and case.backend is not None:
            report.unknown("suite", suite.id, where + ("backend",), f"backend of model {model.id!r}",
                           case.backend, {b.id for b in model.backends})


def _check_plugins(report: "_Reporter", specs: "SpecSet", registry: Any) -> None:
    backends = set(getattr(registry, "backends", {}) or {})
    if backends:  # a backend kind nobody registered is a spelling mistake far more often than a missing plugin
        for model in specs.models.values():
            for i, backend in enumerate(model.backends):
                report.unknown("model", model.id, ("backends", i, "kind"), "backend kind", backend.kind, backends)
                found = registry.backends.get(backend.kind)
                if found is not None and found.remote and not backend.base_url:
                    report("model", model.id, ("backends", i), f"backend kind {backend.kind!r} needs base_url")
    evaluators = set(getattr(registry, "evaluators", {}) or {})
    if evaluators:  # a judge nobody registered: the suite's cases could not be judged
        for suite in specs.suites.values():
            if suite.judge is not None:
                report.unknown("suite", suite.id, ("judge",), "judge", suite.judge, evaluators)
    agents = set(getattr(registry, "agents", {}) or {})
    # An agent whose plugin is not installed is not an error: core alone must run with the shipped specs.
    # It is a note (with the fix), and the runner skips that agent's cases.
    notes = _Reporter(specs, specs.notes)
    for agent in specs.agents.values():
        if agent.plugin not in agents:
            dist = f"gripprobe-{agent.plugin}"
            close = suggest(agent.plugin, agents)
            hint = f"did you mean {close!r}? " if close else ""
            notes("cli_agent", agent.id, ("plugin",),
                  f"agent plugin {agent.plugin!r} is not installed; {hint}its cases will be SKIPPED "
                  f"(install it: pip install {dist}, or ./dev setup installs every in-repo plugin)")


def check_test_plugins(path: Path, data: Any, source: SourceMap, registry: Any) -> list[SpecIssue]:
    """Issues for the plugin kinds of one test document: every validator ``kind`` and the challenge
    ``kind`` must be installed, and each validator's options must fit the options model its plugin
    attached as ``fn.options_model``.

    Works on the document as read (not the validated spec), so it reports these errors even when the
    rest of the file has errors too; entries whose shape is wrong (not a mapping, no string ``kind``)
    are left to the spec model, which reports them.
    """
    registered = dict(getattr(registry, "validators", {}) or {})
    challenges = set(getattr(registry, "challenges", {}) or {})
    issues: list[SpecIssue] = []

    def uninstalled(key_path: KeyPath, what: str, name: str, installed: Iterable[str]) -> None:
        close = suggest(name, installed)
        hint = f"did you mean {close!r}? " if close else ""
        issues.append(make_issue(path, source.line(key_path), format_key_path(key_path),
                                 f"unknown {what} {name!r}; {hint}installed: {short_list(installed)}; "
                                 f"install the plugin that provides it"))

    validators = data.get("validators") if isinstance(data, dict) else None
    for i, entry in enumerate(validators if isinstance(validators, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
            continue
        kind = entry["kind"]
        if kind not in registered:
            uninstalled(("validators", i, "kind"), "validator kind", kind, registered)
            continue
        options = {k: v for k, v in entry.items() if k != "kind"}
        issues.extend(_validator_option_issues(path, source, i, kind, options, registered[kind]))
    challenge = data.get("challenge") if isinstance(data, dict) else None
    if isinstance(challenge, dict) and isinstance(challenge.get("kind"), str) and challenge["kind"] not in challenges:
        uninstalled(("challenge", "kind"), "challenge kind", challenge["kind"], challenges)
    return issues


def _validator_option_issues(path: Path, source: SourceMap, index: int, kind: str, options: dict[str, Any],
                             fn: Any) -> list[SpecIssue]:
    """Validate a validator's options with the pydantic model its plugin attached as ``fn.options_model``."""
    model = getattr(fn, "options_model", None)
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    try:
        model.model_validate(options)
    except ValidationError as exc:
        return issues_from_validation(exc, model, options, source, prefix=("validators", index))
    except Exception as exc:  # noqa: BLE001 - plugin code: a bug in it must not hide the other errors
        return [make_issue(path, source.line(("validators", index)), format_key_path(("validators", index)),
                           f"could not check the options of {kind!r} ({type(exc).__name__}: {exc})")]
    return []


class _Reporter:
    """Appends issues located through the line maps of the loaded specs."""

    def __init__(self, specs: "SpecSet", issues: list[SpecIssue]):
        self.specs = specs
        self.issues = issues

    def __call__(self, kind: str, spec_id: str, key_path: KeyPath, message: str) -> None:
        source = self.specs.sources.get((kind, spec_id))
        path = self.specs.files.get((kind, spec_id))
        if source is None or path is None:
            return
        self.issues.append(make_issue(path, source.line(key_path), format_key_path(key_path), message))

    def unknown(self, kind: str, spec_id: str, key_path: KeyPath, what: str, name: str,
                choices: Iterable[str]) -> None:
        choices = set(choices)
        if name in choices:
            return
        close = suggest(name, choices)
        hint = f"did you mean {close!r}? " if close else ""
        self(kind, spec_id, key_path, f"unknown {what} {name!r}; {hint}known: {short_list(choices)}")
