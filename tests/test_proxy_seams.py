"""The recording proxy's modules meet only through explicit seams.

An :class:`~gripprobe_core.proxy.exchange.Exchange` sees its proxy only as a ``RecordSink``, the client
connections and the ``Relay`` only as a ``ProxyHost``; no module of ``gripprobe_core/proxy`` reads or
writes another object's ``_private`` attribute, or imports another module's private name. These tests
parse the modules (``ast``), so a new shortcut fails here instead of quietly widening the seam.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from gripprobe_core.proxy.exchange import RecordSink
from gripprobe_core.proxy.relay import ProxyHost
from gripprobe_core.proxy.server import RecordingProxy

PROXY = Path(__file__).resolve().parents[1] / "src" / "gripprobe_core" / "proxy"
MODULES = sorted(PROXY.glob("*.py"))
HTTP_LAYER = ("exchange", "http1", "client", "upstream", "relay")
"""Modules that must not know the proxy class itself (only the RecordSink / ProxyHost protocols)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def foreign_private_uses(source: str) -> list[str]:
    """``line: expression`` for every use of another object's private name in ``source``: ``x._a`` and
    ``self.x._a`` (only ``self._a`` / ``cls._a`` are one's own), ``getattr(x, "_a")`` and friends, and
    ``from .module import _a``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value)
              and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls"))):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            found += [(node.lineno, f"from {'.' * node.level}{node.module or ''} import {a.name}")
                      for a in node.names if _private(a.name)]
    return [f"{line}: {text}" for line, text in sorted(found)]


def test_the_checker_sees_each_kind_of_shortcut() -> None:
    source = '''
from .server import _helper
def f(proxy, self_like):
    proxy._count(1)
    self_like.proxy._children.add(2)
    getattr(proxy, "_stopping")
class C:
    def g(self):
        self._mine = self.__class__
        cls = type(self)
        return cls._shared, self.other._theirs
'''
    assert foreign_private_uses(source) == [
        "2: from .server import _helper", "4: proxy._count", "5: self_like.proxy._children",
        "6: getattr(proxy, '_stopping')", "11: self.other._theirs"]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_proxy_module_touches_another_objects_private_attributes(path: Path) -> None:
    uses = foreign_private_uses(path.read_text(encoding="utf-8"))
    assert not uses, (f"{path.name} reaches into private attributes of other objects: {uses}; give the "
                      f"owner a public method or property (for an Exchange: extend RecordSink; for the "
                      f"client connections and the Relay: ProxyHost)")


@pytest.mark.parametrize("name", HTTP_LAYER)
def test_the_http_layer_and_the_exchange_never_name_the_proxy_class(name: str) -> None:
    tree = ast.parse((PROXY / f"{name}.py").read_text(encoding="utf-8"))
    imports = [(node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "server" not in imports and "RecordingProxy" not in names


def _members(protocol: type) -> dict[str, object]:
    """A protocol's members (its own and its bases'): annotated attributes (value ``None``), methods
    and properties."""
    members: dict[str, object] = {}
    for cls in reversed(protocol.__mro__):
        if cls is object or not getattr(cls, "_is_protocol", False) or cls.__module__ == "typing":
            continue
        members.update(dict.fromkeys(vars(cls).get("__annotations__", {})))
        members.update({k: v for k, v in vars(cls).items()
                        if not k.startswith("_") and (inspect.isfunction(v) or isinstance(v, property))})
    return members


@pytest.mark.parametrize("protocol", [RecordSink, ProxyHost], ids=lambda p: p.__name__)
def test_recording_proxy_provides_every_member_of_the_seams(protocol: type, tmp_path: Path) -> None:
    proxy = RecordingProxy("http://127.0.0.1:9/prefix", tmp_path / "r.jsonl")
    members = _members(protocol)
    assert len(members) >= 7
    for name, member in members.items():
        assert hasattr(proxy, name), f"RecordingProxy has no {name!r} ({protocol.__name__})"
        if inspect.isfunction(member):
            want = [(p.name, p.kind) for p in inspect.signature(member).parameters.values()][1:]
            have = [(p.name, p.kind) for p in inspect.signature(getattr(proxy, name)).parameters.values()]
            assert have == want, f"RecordingProxy.{name}{inspect.signature(getattr(proxy, name))} does not match"
        elif isinstance(member, property):
            assert isinstance(inspect.getattr_static(RecordingProxy, name), property), name


def test_each_proxy_module_imports_on_its_own() -> None:
    """No import cycle: every module of the HTTP layer loads first, in a fresh interpreter."""
    script = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.startswith("gripprobe_core")]:
        del sys.modules[loaded]
    importlib.import_module("gripprobe_core.proxy." + name)
"""
    names = [*HTTP_LAYER, "server"]
    res = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True,
                         env={"PYTHONPATH": str(PROXY.parents[1]), "PATH": ""}, timeout=120)
    assert res.returncode == 0, res.stderr
