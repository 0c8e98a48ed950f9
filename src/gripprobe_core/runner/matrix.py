"""The case matrix: from CLI selections or a suite spec to an ordered list of planned cases."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import UserError
from ..models.ids import id_problem
from ..evaluator import EVALUATOR_NAME
from ..models.results import CaseKey
from ..models.specs import BackendSpec, CliAgentSpec, InteractionSpec, ModelSpec, SuiteSpec, TestSpec


@dataclass(frozen=True)
class PlannedCase:
    key: CaseKey
    agent: CliAgentSpec
    model: ModelSpec
    backend: BackendSpec
    test: TestSpec
    format: str
    skip_reason: str | None = None
    proxy_mode: str = ""
    """off | auto | force, settled once by :meth:`settle` (the run's choice, else the agent spec's)."""
    sandbox: str = ""
    """auto | bwrap | none, settled once by :meth:`settle` (the run's or suite's choice, else the agent's)."""
    token_budget: int | None = None
    """Tokens one phase may spend (the recording proxy refuses the next model call past it), settled once by
    :meth:`settle` (the run's or suite's choice, else the model's policy); None: no budget."""
    judge: str = EVALUATOR_NAME
    """The registered evaluator that judges the case (its suite's ``judge:``, else the core's), settled once
    by :meth:`settle`."""
    interaction: InteractionSpec | None = None
    """How the harness answers the agent's requests: the test's ``observe.interaction``, else the suite's,
    settled once by :meth:`settle`; None: no policy (docs/interaction.md)."""

    @property
    def case_id(self) -> str:
        return self.key.slug()

    def settle(self, *, proxy_mode: str | None, sandbox: str | None,
               token_budget: int | None = None, judge: str | None = None,
               interaction: InteractionSpec | None = None) -> "PlannedCase":
        """This case with its proxy mode, sandbox, token budget and judge decided: the run's choice (command
        line, resumed run or suite) when given, else the agent spec's (``telemetry_proxy_mode``, ``sandbox``,
        default auto), the model's policy (``max_tokens_per_phase``, for this agent first) and the core's
        evaluator."""
        return replace(self, proxy_mode=proxy_mode or self.agent.telemetry_proxy_mode,
                       sandbox=sandbox or self.agent.sandbox or "auto",
                       token_budget=token_budget or self._policy_budget(), judge=judge or EVALUATOR_NAME,
                       interaction=self._test_interaction() or interaction)

    def _test_interaction(self) -> InteractionSpec | None:
        return self.test.observe.interaction if self.test.observe is not None else None

    def _policy_budget(self) -> int | None:
        """The model's ``max_tokens_per_phase`` for this agent (``policy.agents.<agent>``), else its general one."""
        pol = self.model.policy
        agent_pol = pol.agents.get(self.agent.id)
        return (agent_pol.max_tokens_per_phase if agent_pol else None) or pol.max_tokens_per_phase


def with_trials(cases: list[PlannedCase], trials: int) -> list[PlannedCase]:
    """Every planned case ``trials`` times (trials ≥ 1), trial by trial: all cells' first trial, then all
    second ones ..., so an interrupted run has a whole first pass first."""
    if trials < 1:
        raise UserError(f"--trials must be at least 1, not {trials}")
    return [replace(case, key=case.key.model_copy(update={"trial": n})) for n in range(1, trials + 1)
            for case in cases]


def select_tests(tests: dict[str, TestSpec], selectors: list[str]) -> list[TestSpec]:
    """Test ids or ``tag:<tag>`` selectors, in the order given, without duplicates."""
    out: dict[str, TestSpec] = {}
    for sel in selectors:
        if sel.startswith("tag:"):
            tag = sel[4:]
            hits = [t for tid, t in sorted(tests.items()) if tag in t.tags]
            if not hits:
                raise UserError(f"no test has tag {tag!r}; tags in use: {', '.join(_tags(tests)) or 'none'}")
            for t in hits:
                out.setdefault(t.id, t)
        elif sel in tests:
            out.setdefault(sel, tests[sel])
        elif (problem := id_problem(sel, "test")) is not None:
            raise UserError(f"unknown test: {problem}")
        else:
            raise UserError(f"unknown test {sel!r}; run `gripprobe validate` or see specs/tests/ for ids")
    return list(out.values())


def _tags(tests: dict[str, TestSpec]) -> list[str]:
    return sorted({tag for t in tests.values() for tag in t.tags})


def _lookup(kind: str, table: dict, key: str):
    if key not in table:
        problem = id_problem(key, kind) if isinstance(key, str) else None  # a lookalike reads like a known id
        raise UserError(f"unknown {kind}: {problem}" if problem else
                        f"unknown {kind} {key!r}; known: {', '.join(sorted(table)) or 'none'}")
    return table[key]


def plan_cases(specs, *, agents: list[str], models: list[str], tests: list[str], formats: list[str] | None = None,
               backend: str | None = None, explicit: list | None = None,
               only_supported_formats: bool = False) -> list[PlannedCase]:
    """Cross product agents × models × tests × formats (formats empty: every format the agent declares).

    A format an agent does not declare gives a SKIPPED case, unless ``only_supported_formats`` (suites:
    ``formats: [tool, whole]`` means "whichever of these each agent has"; an agent with none of them gets
    its first declared format)."""
    planned: dict[str, PlannedCase] = {}
    for fmt in formats or []:  # a format no agent declares still names a (SKIPPED) case's folder
        if (problem := id_problem(fmt, "format")) is not None:
            raise UserError(f"--format {problem}")
    test_specs = select_tests(specs.tests, tests) if tests else []
    for agent_id in agents:
        agent = _lookup("agent", specs.agents, agent_id)
        fmts = list(formats) if formats else list(agent.formats)
        if only_supported_formats and formats:
            fmts = [f for f in fmts if f in agent.formats] or [agent.formats[0]]
        for model_id in models:
            model = _lookup("model", specs.models, model_id)
            be = _backend(model, backend)
            for test in test_specs:
                for fmt in fmts:
                    _add(planned, agent, model, be, test, fmt)
    for c in explicit or []:
        agent = _lookup("agent", specs.agents, c.agent)
        model = _lookup("model", specs.models, c.model)
        _add(planned, agent, model, _backend(model, c.backend or backend), _lookup("test", specs.tests, c.test),
             c.format)
    return list(planned.values())


def plan_suite(specs, suite: SuiteSpec, *, backend: str | None = None) -> list[PlannedCase]:
    return plan_cases(specs, agents=suite.agents, models=suite.models, tests=suite.tests, formats=suite.formats,
                      backend=backend, explicit=suite.cases, only_supported_formats=True)


def _backend(model: ModelSpec, backend_id: str | None) -> BackendSpec:
    try:
        return model.backend(backend_id)
    except KeyError:
        raise UserError(f"model {model.id!r} has no backend {backend_id!r}; it has: "
                        f"{', '.join(b.id for b in model.backends)}") from None


def _add(planned: dict, agent: CliAgentSpec, model: ModelSpec, be: BackendSpec, test: TestSpec, fmt: str) -> None:
    key = CaseKey(agent=agent.id, model=model.id, backend=be.id, format=fmt, test=test.id)
    skip = None if fmt in agent.formats else f"format {fmt!r} not supported by agent {agent.id!r}"
    planned.setdefault(key.slug(), PlannedCase(key, agent, model, be, test, fmt, skip))


def missing_tool_kinds(agent: CliAgentSpec, test: TestSpec) -> list[str]:
    """Requirements of ``test`` the agent cannot perform (a nested list is satisfied by any one kind)."""
    have = set(agent.tool_kinds)
    missing = []
    for req in test.requires:
        options = [req] if isinstance(req, str) else list(req)
        if not have.intersection(options):
            missing.append("|".join(options))
    return missing
