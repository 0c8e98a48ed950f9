"""Plugin manager factory and the registry of what plugins provide.

Nothing loads at import time: :func:`make_plugin_manager` builds a fresh manager (tests get their own).
The core's default plugins are registered through the same manager as third-party ones, first, under
short names (``event_evaluator``, ``reference`` ...). Hooks are called only through
:attr:`GripProbePluginManager.hook`, the typed facade :class:`gripprobe_core.hooks.Hooks`.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from types import FunctionType, MethodType, ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from . import hookspecs
from .errors import PluginError
from .hooks import Hooks

if TYPE_CHECKING:  # pragma: no cover
    from .challenges import ChallengeFactory
    from .drivers import AgentDriver, Backend
    from .evaluator import Evaluator
    from .oracle.dialects import Dialect
    from .validators.context import Validator

ENTRY_POINT_GROUP = "gripprobe"

#: The core's default plugins, registered first, in this order: name → module.
DEFAULT_PLUGINS: dict[str, str] = {
    "event_evaluator": "gripprobe_core.defaults.evaluator",
    "validators": "gripprobe_core.defaults.validators",
    "challenges": "gripprobe_core.defaults.challenges",
    "backends": "gripprobe_core.defaults.backends",
    "reference": "gripprobe_core.defaults.refagent",
    "recording_proxy": "gripprobe_core.defaults.proxy",
    "telemetry": "gripprobe_core.defaults.telemetry",
}


@dataclass
class PluginRecord:
    name: str
    distribution: str
    version: str
    hooks: list[str]
    builtin: bool


@dataclass
class LoadFailure:
    name: str
    distribution: str
    error: str

    def __str__(self) -> str:
        return f"{self.distribution}[{self.name}]: {self.error}"


@dataclass
class GripProbePluginManager:
    """A pluggy manager, its typed hook facade, and what discovery learned (failures, distributions)."""

    pm: pluggy.PluginManager
    failures: list[LoadFailure] = field(default_factory=list)
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # plugin name -> (dist, version)
    _registry: "Registry | None" = None

    @property
    def hook(self) -> Hooks:
        """Every hook call goes through here (typed)."""
        return Hooks(self.pm)

    def records(self) -> list[PluginRecord]:
        """Every registered plugin: name, distribution, version, the hooks it implements."""
        out = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            dist, ver = self.origins.get(name) or ("gripprobe-core", _version("gripprobe-core"))
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
            out.append(PluginRecord(name, dist, ver, hooks, name in DEFAULT_PLUGINS))
        return out

    @property
    def registry(self) -> "Registry":
        if self._registry is None:
            self._registry = Registry.collect(self)
        return self._registry

    def owner(self, obj: Any) -> str:
        """``distribution[plugin]`` of a registered object: the plugin whose module (else package) defines it."""
        module = obj.__module__ if inspect.isfunction(obj) or inspect.isclass(obj) else type(obj).__module__
        best = None
        for name, plugin in self.pm.list_name_plugin():
            pmod = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
            if pmod == module:
                best = name
                break
            if best is None and pmod.split(".")[0] == module.split(".")[0] and module.split(".")[0] != "gripprobe_core":
                best = name
        if best is None:
            return f"{_distribution_of(module)}[{module}]"
        return f"{self.origins.get(best, ('?', ''))[0]}[{best}]"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def _name_version(dist: Any) -> tuple[str, str]:
    """``(name, version)`` of an entry point's distribution (``unknown`` without one), from one parse of its
    metadata."""
    if dist is None:
        return "unknown", "unknown"
    # The two header lines read directly: ``dist.metadata`` runs the email parser over the whole file (~0.4 ms a
    # distribution, before the first case); the headers end at the first blank line.
    found: dict[str, str] = {}
    for line in (dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "").splitlines():
        if not line:
            break
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in ("name", "version") and key not in found:
            found[key] = value.strip()
    if len(found) == 2 and all(found.values()):
        return found["name"], found["version"]
    meta = dist.metadata
    return meta["Name"], meta["Version"]


@lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    return dict(metadata.packages_distributions())


def _distribution_of(module: str) -> str:
    top = module.split(".")[0]
    if top == __package__:  # the core's own objects: no scan of every installed distribution's files (~70 ms)
        return "gripprobe-core"
    return (_distributions().get(top) or [top])[0]


def _async_hooks(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    """Hooks a plugin implements with a coroutine (or async generator) function: every GripProbe hook is
    synchronous, and a coroutine object is never None, so it would answer every *first result* hook."""
    return sorted(impl.function.__name__ for caller in pm.get_hookcallers(plugin) or []
                  for impl in caller.get_hookimpls() if impl.plugin is plugin
                  and (inspect.iscoroutinefunction(impl.function) or inspect.isasyncgenfunction(impl.function)))


#: Hooks that no longer exist, and what replaced them (said when a plugin still implements one).
REPLACED_HOOKS: dict[str, str] = {
    "evaluate": "register_evaluators: register your judge by name, and a suite names it with `judge:`",
}


def _unknown_hooks(pm: pluggy.PluginManager, plugin: Any) -> list[str]:
    """What is wrong with each hook implementation of ``plugin`` that matches no GripProbe hook (a misspelt
    name, a hook that was replaced): pluggy accepts such an implementation silently and never calls it."""
    out = []
    specs = sorted(name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
                   if hasattr(fn, "gripprobe_spec"))
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.has_spec() or not any(i.plugin is plugin and not i.optionalhook for i in caller.get_hookimpls()):
            continue
        name = caller.name
        if name in REPLACED_HOOKS:
            hint = f"it was replaced by {REPLACED_HOOKS[name]}"
        else:
            close = difflib.get_close_matches(name, specs, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the hooks are: {', '.join(specs)}"
        out.append(f"hook implementation {name!r} matches no GripProbe hook ({hint}; docs/hooks.md)")
    return sorted(out)


_HOOKABLE = (FunctionType, staticmethod, classmethod, MethodType)


class _Manager(pluggy.PluginManager):
    """pluggy's manager, finding a module plugin's hook implementations faster: pluggy looks every name of a
    plugin up with :func:`inspect.getattr_static` (~8 us each; a plugin module's imports and constants are
    most of its ~60 names, 700 in all, ~4 ms before the first case). A name whose value in the module's own
    namespace cannot be a hook (anything but a function, a static or class method, a bound method) is passed
    over at once, as is a plain function without GripProbe's hook marker, both as pluggy would pass them over;
    every other name is pluggy's to judge."""

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if type(plugin) is ModuleType:
            value = plugin.__dict__.get(name)
            if type(value) is FunctionType:  # pluggy reads the marker off the function itself
                if getattr(value, self.project_name + "_impl", None) is None:
                    return None
            elif not isinstance(value, _HOOKABLE):
                return None
        return super().parse_hookimpl_opts(plugin, name)


def make_plugin_manager(*, load_entry_points: bool = True, strict: bool | None = None,
                        extra: list[Any] | None = None) -> GripProbePluginManager:
    """Build a fresh plugin manager: hookspecs, default plugins, then entry points sorted by name, then
    ``extra`` plugin objects (tests).

    A plugin that fails to load, implements a hook with a coroutine function, or has a hook implementation
    that matches no hook (a misspelt name would otherwise load and never be called) is recorded in
    ``failures`` and skipped, unless ``strict`` (or ``GRIPPROBE_STRICT_PLUGINS=1``), in which case
    :class:`PluginError` is raised naming it and the hook.
    """
    if strict is None:
        strict = os.environ.get("GRIPPROBE_STRICT_PLUGINS", "") not in ("", "0", "false")
    pm = _Manager("gripprobe")
    pm.add_hookspecs(hookspecs)
    plugins = GripProbePluginManager(pm)
    core_version = _version("gripprobe-core")
    for name, modname in DEFAULT_PLUGINS.items():
        pm.register(importlib.import_module(modname), name=name)
        plugins.origins[name] = ("gripprobe-core", core_version)

    def admit(name: str, dist: str, version: str, load: Any) -> None:
        try:
            plugin = load()
            pm.register(plugin, name=name)
        except Exception as exc:  # a broken plugin must not take the others down
            fail(LoadFailure(name, dist, f"{type(exc).__name__}: {exc}"), exc)
            return
        bad = _async_hooks(pm, plugin)
        if bad:
            pm.unregister(plugin)
            fail(LoadFailure(name, dist, f"hook {', '.join(bad)} is a coroutine function (async def); GripProbe "
                                         f"hooks are synchronous: make it a plain def"), None)
            return
        unknown = _unknown_hooks(pm, plugin)
        if unknown:
            pm.unregister(plugin)
            fail(LoadFailure(name, dist, "; ".join(unknown)), None)
            return
        plugins.origins[name] = (dist, version)

    def fail(failure: LoadFailure, exc: BaseException | None) -> None:
        if strict:
            raise PluginError(f"cannot load plugin {failure} (GRIPPROBE_STRICT_PLUGINS is set)") from exc
        plugins.failures.append(failure)

    if load_entry_points:
        # Each distribution's metadata parsed once (``dist.name`` and ``dist.version`` parse it on every access).
        eps = sorted(((*_name_version(ep.dist), ep) for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)),
                     key=lambda item: ((item[0] if item[2].dist else ""), item[2].name))
        for dist, version, ep in eps:
            if pm.has_plugin(ep.name):
                other = plugins.origins.get(ep.name, ("?", "?"))[0]
                raise PluginError(f"plugin name {ep.name!r} is registered by both {other} and {dist}; "
                                  f"uninstall one of them")
            admit(ep.name, dist, version, ep.load)
    for i, plugin in enumerate(extra or []):
        name = getattr(plugin, "__name__", None) or type(plugin).__name__ or f"extra-{i}"
        admit(name, "(in-process)", "", lambda plugin=plugin: plugin)
    return plugins


@dataclass
class Registry:
    """What plugins registered through the ``register_*`` hooks, with duplicates rejected.

    ``dialects`` are the oracle dialects every agent driver brings (:meth:`AgentDriver.oracle_dialects`).
    """

    agents: "dict[str, AgentDriver]" = field(default_factory=dict)
    backends: "dict[str, Backend]" = field(default_factory=dict)
    validators: "dict[str, Validator]" = field(default_factory=dict)
    challenges: "dict[str, ChallengeFactory]" = field(default_factory=dict)
    evaluators: "dict[str, Evaluator]" = field(default_factory=dict)
    """The judges, by the name a suite's ``judge:`` gives and a verdict's ``verdict_source`` carries."""
    dialects: "dict[str, Dialect]" = field(default_factory=dict)
    owners: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def collect(cls, plugins: GripProbePluginManager) -> "Registry":
        from .drivers import AgentDriver, Backend, calls_off_wire_problems

        reg = cls()

        def keep(what: str, store: dict[str, Any], key: Any, value: Any, owner: str) -> None:
            if not isinstance(key, str) or not key:
                raise PluginError(f"{owner} registered a {what} without a name ({key!r})")
            if key in store:
                raise PluginError(f"{what} {key!r} is registered twice: by {reg.owners[(what, key)]} and by "
                                  f"{owner}; uninstall or rename one")
            store[key] = value
            reg.owners[(what, key)] = owner

        def agent(driver: AgentDriver) -> None:
            owner = plugins.owner(driver)
            if not isinstance(driver, AgentDriver):
                raise PluginError(f"{owner} registered {driver!r} as an agent driver, but it lacks "
                                  f"{', '.join(_missing(driver, AgentDriver))} (see gripprobe_core.plugin.BaseAgentDriver)")
            problems = calls_off_wire_problems(driver)
            if problems:
                raise PluginError(f"{owner} registered agent driver {driver.name!r}, but its {problems[0]} "
                                  f"(docs/plugin-guide.md, calls_off_wire)")
            keep("agent", reg.agents, driver.name, driver, owner)
            for name, dialect in dict(driver.oracle_dialects()).items():
                keep("oracle dialect", reg.dialects, name, dialect, owner)

        def backend(b: Backend) -> None:
            owner = plugins.owner(b)
            if not isinstance(b, Backend):
                raise PluginError(f"{owner} registered {b!r} as a backend, but it lacks {', '.join(_missing(b, Backend))}")
            keep("backend", reg.backends, b.kind, b, owner)

        hooks = plugins.hook
        hooks.register_agents(agent)
        hooks.register_backends(backend)
        hooks.register_validators(lambda kind, fn: keep("validator", reg.validators, kind, fn, plugins.owner(fn)))
        hooks.register_challenge_servers(
            lambda kind, factory: keep("challenge server", reg.challenges, kind, factory, plugins.owner(factory)))

        def evaluator(name: str, fn: Evaluator) -> None:
            owner = plugins.owner(fn)
            if not callable(fn):
                raise PluginError(f"{owner} registered evaluator {name!r} as {fn!r}, which is not callable "
                                  f"(fn(inputs: EvaluationInputs) -> Verdict)")
            keep("evaluator", reg.evaluators, name, fn, owner)

        hooks.register_evaluators(evaluator)
        return reg


def _missing(obj: Any, protocol: type) -> list[str]:
    members = [m for m in dir(protocol) if not m.startswith("_")]
    members += list(getattr(protocol, "__annotations__", {}))
    return sorted({m for m in members if not hasattr(obj, m)})


def describe_failures(plugins: GripProbePluginManager) -> list[str]:
    return [f"warning: plugin {f} (skipped; set GRIPPROBE_STRICT_PLUGINS=1 to make this fatal)"
            for f in plugins.failures]
