"""A run's settings (what the user asked for) and the open run every case shares.

:class:`RunSettings` holds the choices of ``gripprobe run`` / ``run-suite`` (results folder, jobs,
timeouts, proxy mode, sandbox, caps, installed agents); :class:`ActiveRun` is a run once it has started:
its id and folder, the plugins and their registry, the values fixed at its start, its scratch folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..hooks import Hooks
from ..pluginmanager import GripProbePluginManager, Registry
from ..store import RunFolder
from .process import DEFAULT_CAPTURE_CAP


@dataclass(frozen=True)
class RunSettings:
    """What the user asked of a run (``gripprobe run`` and ``run-suite`` options, resolved)."""

    results_root: Path
    jobs: int = 1
    proxy_mode: str | None = None
    """off | auto | force for every case; None: each agent spec's ``telemetry_proxy_mode``."""
    timeout_s: float | None = None
    base_url_override: str | None = None
    suite: str | None = None
    """The suite run as written; None for an ad-hoc selection (see ``selection``)."""
    selection: dict | None = None
    """An ad-hoc run's selection (agents, models, tests, formats, backend, from_suite), for the manifest."""
    specs_layers: tuple[Path, ...] = ()
    """The spec folders loaded, bottom (the shipped specs) first."""
    argv: list[str] | None = None
    installed: Mapping[str, Any] = field(default_factory=dict)
    """agent id -> InstalledAgent, for agents installed from a registry (see cli/agents_cmd.py)."""
    install_missing: bool = True
    """Whether an executor that installs on its own nodes (``--executor ray``) may install a missing agent
    (``--no-install``: False, its cases are SKIPPED there)."""
    hardware_profile: str | None = None
    sandbox: str | None = None
    """auto | bwrap | none for every case; None: each agent spec's ``sandbox`` (default auto)."""
    judge: str | None = None
    """The registered evaluator that judges every case (the suite's ``judge:``); None: the core's."""
    proxy_max_body: int | None = None
    """The recording proxy's request body cap in bytes (None: its default, 64 MiB)."""
    preflight: list[dict] | None = None
    """What the backend preflight saw (``BackendProbe`` dicts, see runner/preflight.py), for the manifest."""
    trials: int = 1
    """How many times each cell runs (recorded in the manifest; the cases are already expanded)."""
    interaction: Any = None
    """The suite's ``observe.interaction`` (an InteractionSpec), for its tests that carry none; None: none."""
    token_budget: int | None = None
    """Tokens each phase may spend (--max-tokens-per-phase, else the suite's); None: each model's policy."""
    warmup: bool = True
    """Whether each case runs its warmup phase before the measured one (``--no-warmup``, a suite's ``warmup:
    false``: the measured phase alone)."""
    durable: bool = True
    """Whether case files are made durable as they are written (False on a cluster worker, whose copy is
    temporary: the driver makes the delivered case durable)."""
    capture_cap: int = DEFAULT_CAPTURE_CAP
    """Bytes kept of each of an agent's stdout and stderr per phase."""
    source_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    """The environment agents' allowlisted variables and API keys come from."""


@dataclass(frozen=True)
class ActiveRun:
    """A started run: what every one of its cases shares."""

    id: str
    folder: RunFolder
    plugins: GripProbePluginManager
    values: Mapping[str, str]
    """Values fixed at the run's start (``today`` ...; recorded in every case.json as ``run_values``)."""
    scratch: Path
    """Where the phases' workspaces, homes and temp folders live (outside the results tree)."""
    settings: RunSettings
    signer: Any = None
    """The harness's key (:class:`~gripprobe_core.integrity.keys.Signer`) that signs every case as it is
    written; None on a cluster worker (the driver signs what it receives) and in a resumed run from before
    signatures. Never in :class:`RunSettings`, which travels to workers."""
    pages: Any = None
    """Case pages rendered as cases end (:class:`~gripprobe_core.runner.case_pages.CasePages`), written with the
    run's reports at its end; None: every page is rendered then (a cluster worker: the driver writes them)."""

    @property
    def hooks(self) -> Hooks:
        return self.plugins.hook

    def responder(self, spec: Any) -> Any:
        """Who answers a session's requests under ``spec``: the operator on the terminal for ``manual``,
        else the policy itself (:class:`~gripprobe_core.interaction.PolicyResponder`)."""
        from ..interaction import PolicyResponder
        from .manual import TerminalResponder

        if spec is not None and spec.policy == "manual":
            return TerminalResponder()
        return PolicyResponder(spec)

    @property
    def registry(self) -> Registry:
        return self.plugins.registry
