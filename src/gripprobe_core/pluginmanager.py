"""Plugin manager factory and registry facade.

Nothing loads at import time: :func:`make_plugin_manager` builds a fresh manager (tests get their own).
Built-ins are in-tree default plugins registered through the same manager as third-party ones.
"""

from __future__ import annotations

import importlib
import os

from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError

ENTRY_POINT_GROUP = "gripprobe"

#: In-tree default plugins, registered first, in this order.
DEFAULT_PLUGINS: tuple[str, ...] = (
    "gripprobe_core.defaults.evaluator",
    "gripprobe_core.defaults.validators",
    "gripprobe_core.defaults.challenges",
    "gripprobe_core.defaults.refagent",
    "gripprobe_core.defaults.oracle_dialects",
    "gripprobe_core.defaults.proxy",
    "gripprobe_core.defaults.telemetry",
)


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
    """A pluggy manager plus what discovery learned (failures, distributions)."""

    pm: pluggy.PluginManager
    failures: list[LoadFailure] = field(default_factory=list)
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # plugin name -> (dist, version)
    _registry: "Registry | None" = None

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def plugins(self) -> list[PluginRecord]:
        out = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            dist, ver = self.origins.get(name, ("gripprobe-core", _version("gripprobe-core")))
            hooks = sorted(h.name for h in self.pm.get_hookcallers(plugin) or [])
            out.append(PluginRecord(name, dist, ver, hooks, name in DEFAULT_PLUGINS))
        return out

    @property
    def registry(self) -> "Registry":
        if self._registry is None:
            self._registry = Registry.collect(self)
        return self._registry


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "unknown"


def make_plugin_manager(*, load_entry_points: bool = True, strict: bool | None = None,
                        extra: list[Any] | None = None) -> GripProbePluginManager:
    """Build a fresh plugin manager: hookspecs, default plugins, then entry points sorted by name.

    A plugin that fails to import is recorded in ``failures`` and skipped, unless ``strict`` (or
    ``GRIPPROBE_STRICT_PLUGINS=1``), in which case :class:`PluginError` is raised naming it.
    """
    if strict is None:
        strict = os.environ.get("GRIPPROBE_STRICT_PLUGINS", "") not in ("", "0", "false")
    pm = pluggy.PluginManager("gripprobe")
    pm.add_hookspecs(hookspecs)
    gpm = GripProbePluginManager(pm)
    core_version = _version("gripprobe-core")
    for modname in DEFAULT_PLUGINS:
        mod = importlib.import_module(modname)
        pm.register(mod, name=modname)
        gpm.origins[modname] = ("gripprobe-core", core_version)
    if load_entry_points:
        eps = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP),
                     key=lambda ep: ((ep.dist.name if ep.dist else ""), ep.name))
        for ep in eps:
            dist = ep.dist.name if ep.dist else "unknown"
            ver = ep.dist.version if ep.dist else "unknown"
            if pm.has_plugin(ep.name):
                other = gpm.origins.get(ep.name, ("?", "?"))[0]
                raise PluginError(f"plugin name {ep.name!r} is registered by both {other} and {dist}; "
                                  f"uninstall one of them")
            try:
                plugin = ep.load()
                pm.register(plugin, name=ep.name)
            except Exception as exc:  # a broken plugin must not take the others down
                failure = LoadFailure(ep.name, dist, f"{type(exc).__name__}: {exc}")
                if strict:
                    raise PluginError(f"cannot load plugin {failure} (GRIPPROBE_STRICT_PLUGINS is set)") from exc
                gpm.failures.append(failure)
                continue
            gpm.origins[ep.name] = (dist, ver)
    for i, plugin in enumerate(extra or []):
        name = getattr(plugin, "__name__", f"extra-{i}")
        pm.register(plugin, name=name)
        gpm.origins[name] = ("(in-process)", "")
    return gpm


@dataclass
class Registry:
    """What plugins registered through the ``register_*`` hooks, with duplicates rejected."""

    agents: dict[str, Any] = field(default_factory=dict)
    validators: dict[str, Any] = field(default_factory=dict)
    challenges: dict[str, Any] = field(default_factory=dict)
    dialects: dict[str, Any] = field(default_factory=dict)
    owners: dict[tuple[str, str], str] = field(default_factory=dict)

    @classmethod
    def collect(cls, gpm: GripProbePluginManager) -> "Registry":
        reg = cls()
        for what, hookname, store in (
            ("agent", "register_agents", reg.agents),
            ("validator", "register_validators", reg.validators),
            ("challenge server", "register_challenge_servers", reg.challenges),
            ("oracle dialect", "register_oracle_dialects", reg.dialects),
        ):
            for impl in reversed(getattr(gpm.pm.hook, hookname).get_hookimpls()):
                owner = gpm.origins.get(impl.plugin_name, (impl.plugin_name, ""))[0]
                owner = f"{owner}[{impl.plugin_name}]"

                def register(name: Any, obj: Any = None, *, _store=store, _what=what, _owner=owner) -> None:
                    key = getattr(name, "name", name)
                    value = name if obj is None else obj
                    if key in _store:
                        first = reg.owners[(_what, key)]
                        raise PluginError(f"{_what} {key!r} is registered twice: by {first} and by {_owner}; "
                                          f"uninstall or rename one")
                    _store[key] = value
                    reg.owners[(_what, key)] = _owner

                impl.function(register=register)
        return reg


def describe_failures(gpm: GripProbePluginManager) -> list[str]:
    return [f"warning: plugin {f} (skipped; set GRIPPROBE_STRICT_PLUGINS=1 to make this fatal)"
            for f in gpm.failures]


