"""Names of a package that load on first use: a module ``__getattr__`` and ``__dir__`` (PEP 562) built from a
table of where each name lives, so importing one submodule does not import its siblings."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib import import_module
from typing import Any


TABLES: dict[str, dict[str, tuple[str, str]]] = {}
"""Each lazy module's table (its ``__name__`` → public name → (module, attribute)), for tests that compare it
with the imports a type checker reads."""


def lazy_names(module_name: str, namespace: dict[str, Any], where: Mapping[str, Iterable[str]], *,
               package: str | None = None) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for the module ``module_name`` (its ``__name__``; ``namespace`` its ``globals()``;
    ``package``: what relative names start from, when the module is no package: its ``__package__``):
    ``where`` maps a submodule (``".merge"``, ``"..oracle.server"``) to the names it gives, each ``name`` or
    ``public=attr`` (the module's ``attr`` under another name). A name is imported once, then kept."""
    table: dict[str, tuple[str, str]] = {}
    for module, names in where.items():
        for entry in names:
            public, _, attr = entry.partition("=")
            table[public] = (module, attr or public)
    TABLES[module_name] = table

    def __getattr__(name: str) -> Any:
        found = table.get(name)
        if found is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = namespace[name] = getattr(import_module(found[0], package or module_name), found[1])
        return value

    def __dir__() -> list[str]:
        return sorted(namespace.get("__all__") or table)

    return __getattr__, __dir__
