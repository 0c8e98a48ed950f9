"""Names of a package that load on first use: a module ``__getattr__`` and ``__dir__`` (PEP 562) built from a
table of where each name lives, so importing one submodule does not import its siblings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, namespace: dict[str, Any], where: Mapping[str, Iterable[str]]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``; ``namespace`` its ``globals()``):
    ``where`` maps a submodule (``".merge"``) to the names it gives. A name is imported once, then kept."""
    table = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(import_module(module, package), name)
        return value

    def __dir__() -> list[str]:
        return sorted(namespace.get("__all__") or table)

    return __getattr__, __dir__
