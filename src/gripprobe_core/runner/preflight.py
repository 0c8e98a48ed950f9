"""Backends are checked before they are trusted: one probe per remote backend.

Before a run's matrix starts, every remote model backend its cases will use (not the embedded oracle,
which the runner starts itself) is probed concurrently by its :class:`~gripprobe_core.drivers.Backend`
(``GET <root>/v1/models`` for an OpenAI-compatible server, ``GET <root>/api/tags`` for Ollama, where
``<root>`` is the base URL the case would use: ``--base-url`` when given, else the spec's ``base_url``,
without a trailing ``/v1``). One that does not answer stops the run before anything is written
(:class:`BackendUnreachable`, exit 2, one line per backend with the fix). The runner probes again right
after each phase, so a backend that died mid-run is a harness fact, not the agent's failure (see
``judge.backend_was_unreachable``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from ..backends import server_root
from ..drivers import Backend
from ..errors import UserError
from ..models.results import BackendProbe
from .matrix import PlannedCase, missing_tool_kinds

PROBE_TIMEOUT_S = 5.0
"""Whole-probe budget (connect, answer, body): a live server lists its models well within it."""


@dataclass
class BackendTarget:
    """One backend the planned cases use, as they would reach it."""

    backend_id: str
    kind: str
    base_url: str
    api_key_env: str | None
    models: list[str] = field(default_factory=list)
    """Ids of the model specs that use it (to find the spec to fix)."""
    where: str | None = None
    """``file:line`` of its ``base_url`` in the first model spec that uses it, when known."""
    resources: dict[str, float] = field(default_factory=dict)
    """The Ray resources its backend spec asks for: with ``--executor ray`` it is probed from a node that
    offers them (the node that will reach it), not from the driver."""


def backend_targets(cases: Iterable[PlannedCase], backends: Mapping[str, Backend], *,
                    base_url_override: str | None = None,
                    locate: Callable[[PlannedCase], str | None] | None = None) -> list[BackendTarget]:
    """The distinct remote backends of the cases that will run (not SKIPPED, not TOOL_UNSUPPORTED).
    ``locate(case)`` may say where the case's backend ``base_url`` is written (``file:line``)."""
    out: dict[tuple, BackendTarget] = {}
    for case in cases:
        be = case.backend
        kind = backends.get(be.kind)
        if kind is None or not kind.remote or case.skip_reason or missing_tool_kinds(case.agent, case.test):
            continue
        url = server_root(base_url_override or be.base_url or "")
        key = (be.id, be.kind, url, be.api_key_env, tuple(sorted(be.resources.items())))
        if key not in out:
            out[key] = BackendTarget(be.id, be.kind, url, be.api_key_env, where=locate(case) if locate else None,
                                     resources=dict(be.resources))
        target = out[key]
        if case.model.id not in target.models:
            target.models.append(case.model.id)
    return list(out.values())


def fix_for(probe: BackendProbe, target: BackendTarget, *, override: bool, env: Mapping[str, str]) -> str:
    """What the user should do about an unreachable backend, in one clause."""
    where = "--base-url" if override else \
        f"base_url ({target.where or 'model ' + ', '.join(target.models)})"
    if probe.problem == "auth":
        if not target.api_key_env:
            return "the server wants an API key: set api_key_env on the backend spec and export that variable"
        if not env.get(target.api_key_env):
            return f"set {target.api_key_env} (it is not set)"
        return f"set {target.api_key_env} to a key this server accepts"
    if probe.problem in ("http", "body"):
        server = "an Ollama" if target.kind == "ollama" else "an OpenAI-compatible"
        return f"check {where}: is it the root of {server} server?"
    if probe.problem == "url":
        return f"fix {where}"
    return f"start the server, or check {where}"


class BackendUnreachable(UserError):
    """One or more backends did not answer the preflight; one line per backend (exit 2)."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        super().__init__("\nerror: ".join(self.lines))


def unreachable_line(probe: BackendProbe, target: BackendTarget, fix: str) -> str:
    return (f"backend {target.backend_id!r} ({target.kind}) is unreachable: GET {probe.url}: {probe.error}; "
            f"fix: {fix}")


async def probe_targets(targets: list[BackendTarget], backends: Mapping[str, Backend], env: Mapping[str, str],
                        timeout_s: float = PROBE_TIMEOUT_S) -> list[BackendProbe]:
    """Probe every target at once; results in the order of ``targets``."""
    return list(await asyncio.gather(*(
        backends[t.kind].probe(t.base_url, api_key=env.get(t.api_key_env) if t.api_key_env else None,
                               backend_id=t.backend_id, timeout_s=timeout_s) for t in targets)))


def preflight(cases: Iterable[PlannedCase], backends: Mapping[str, Backend], *, base_url_override: str | None,
              env: Mapping[str, str], locate: Callable[[PlannedCase], str | None] | None = None,
              timeout_s: float = PROBE_TIMEOUT_S,
              probe: Callable[[list[BackendTarget]], list[BackendProbe]] | None = None) -> list[BackendProbe]:
    """Probe the remote backends ``cases`` use; raise :class:`BackendUnreachable` naming each one that did
    not answer, else return what every probe saw (for manifest.json). No backend to probe: ``[]``.
    ``probe`` probes the targets elsewhere (a cluster executor: from the nodes that will reach them)."""
    from .eventloop import run as run_loop

    targets = backend_targets(cases, backends, base_url_override=base_url_override, locate=locate)
    if not targets:
        return []
    probes = probe(targets) if probe is not None else run_loop(probe_targets(targets, backends, env, timeout_s))
    bad = [unreachable_line(p, t, fix_for(p, t, override=bool(base_url_override), env=env))
           for p, t in zip(probes, targets) if not p.reachable]
    if bad:
        raise BackendUnreachable(bad)
    return probes
