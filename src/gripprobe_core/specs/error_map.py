"""Turn a pydantic ``ValidationError`` into ``file:line: key.path: message`` issues.

Pydantic locations (``loc``) mix data keys, list indexes and, inside unions, the name of the union
member that was tried (``('reference', 0, 'ReferenceShell', 'shell')``). We walk the spec model's
types alongside the ``loc`` to tell the two apart, keep the data path for the line lookup, and
collapse the errors of a union into the ones of the member the author most likely meant.
"""

from __future__ import annotations

import math
import re
import types
import typing

from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from .issues import KeyPath, SpecIssue, format_key_path, make_issue, short_list, suggest
from .yaml_source import SourceMap, yaml_type

# Errors that mean "the value has the wrong shape for this union member altogether".
_SHAPE_ERRORS = frozenset({
    "model_type", "model_attributes_type", "dict_type", "list_type", "string_type", "int_type",
    "float_type", "bool_type", "tuple_type", "set_type", "none_required", "is_instance_of",
})
_FRIENDLY_TYPE = {
    "model_type": "a mapping", "model_attributes_type": "a mapping", "dict_type": "a mapping",
    "list_type": "a list", "string_type": "a string", "tuple_type": "a list", "set_type": "a list",
}


@dataclass(frozen=True)
class _Located:
    """One pydantic error, with its loc split into the data path and the union members tried."""

    type: str
    msg: str
    data_path: KeyPath
    unions: tuple[tuple[int, str], ...]  # (position in data_path, member tag)
    parent: Any  # the model class holding the last key, when known
    input: Any
    ctx: Any = None
    candidates: tuple[str, ...] | None = None  # valid keys, for a merged "unknown key" error


def issues_from_validation(exc: ValidationError, model: type[BaseModel], data: Any,
                           source: SourceMap, prefix: KeyPath = ()) -> list[SpecIssue]:
    """Issues for every error in ``exc`` raised while validating ``data`` (read from ``source``).

    ``prefix`` is where ``data`` sits in the file when it is only part of it (a validator's options).
    """
    located = [_locate(model, err) for err in exc.errors(include_url=False)]
    out = []
    for err in _resolve_unions(located):
        key = format_key_path(err.data_path, data)
        if prefix:
            head = format_key_path(prefix)
            key = head + key if key.startswith("[") or not key else f"{head}.{key}"
        out.append(make_issue(source.path, source.line(prefix + err.data_path), key, _message(err)))
    return out


# --------------------------------------------------------------------------- loc → data path

def _locate(model: type[BaseModel], err: Any) -> _Located:
    data_path: list[Any] = []
    unions: list[tuple[int, str]] = []
    current: Any = model
    parent: Any = None
    for el in err.get("loc", ()):
        members = _union_members(current)
        if members is not None:
            member = _match_member(members, el)
            if member is not None:
                unions.append((len(data_path), str(el)))
                current = member
                continue
            current = None
        parent = _strip_optional(current)
        data_path.append(el)
        current = _child_type(parent, el)
    return _Located(err.get("type", ""), str(err.get("msg", "")), tuple(data_path), tuple(unions), parent,
                    err.get("input"), err.get("ctx"))


def _strip_optional(tp: Any) -> Any:
    for _ in range(10):
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if origin in (typing.Union, types.UnionType):
            others = [a for a in typing.get_args(tp) if a is not type(None)]
            if len(others) == 1:
                tp = others[0]
                continue
        return tp
    return tp


def _union_members(tp: Any) -> list[Any] | None:
    tp = _strip_optional(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return None


def _match_member(members: list[Any], tag: Any) -> Any:
    if not isinstance(tag, str):
        return None
    for m in members:
        origin = typing.get_origin(m)
        if isinstance(m, type) and (m.__name__ == tag or _wrapped_name(tag) == m.__name__):
            return m
        if origin is Literal and tag.startswith("literal["):
            return m
        if origin is not None and getattr(origin, "__name__", None) == tag.split("[", 1)[0]:
            return m
    return None


def _wrapped_name(tag: str) -> str | None:
    """``Model`` from pydantic's tag for a model with validators, ``function-after[check(), Model]``."""
    m = re.fullmatch(r"function-(?:after|before|wrap|plain)\[.*?(?:, )?(\w+)\]", tag)
    return m.group(1) if m else None


def _child_type(tp: Any, el: Any) -> Any:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        field = tp.model_fields.get(el) if isinstance(el, str) else None
        return field.annotation if field is not None else None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _model_keys(tp: Any) -> list[str]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return []


# --------------------------------------------------------------------------- unions

def _resolve_unions(errors: list[_Located]) -> list[_Located]:
    """Keep plain errors; for each union, keep only the errors of the member the author meant."""
    plain = [e for e in errors if not e.unions]
    groups: dict[KeyPath, list[_Located]] = {}
    for e in errors:
        if e.unions:
            pos = e.unions[0][0]
            groups.setdefault(e.data_path[:pos], []).append(e)
    out = list(plain)
    for point, group in groups.items():
        out.extend(_resolve_unions(_pick_member(point, group)))
    return out


def _pick_member(point: KeyPath, group: list[_Located]) -> list[_Located]:
    by_member: dict[str, list[_Located]] = {}
    for e in group:
        by_member.setdefault(e.unions[0][1], []).append(e)
    depth = len(point)

    def shape_mismatch(errs: list[_Located]) -> bool:
        return any(len(e.data_path) == depth and (
            e.type in _SHAPE_ERRORS or (e.type == "literal_error" and isinstance(e.input, (dict, list))))
            for e in errs)

    fitting = {m: errs for m, errs in by_member.items() if not shape_mismatch(errs)}
    if not fitting:
        wanted = sorted({_FRIENDLY_TYPE.get(e.type, e.msg) for e in group if len(e.data_path) == depth})
        sample = group[0]
        return [_Located("custom", f"expected {' or '.join(wanted)}, got {yaml_type(sample.input)}",
                         point, (), None, sample.input)]
    fewest = min(len(errs) for errs in fitting.values())
    tied = {m: errs for m, errs in fitting.items() if len(errs) == fewest}
    first = _strip_first_union(next(iter(tied.values())))
    if len(tied) == 1:
        return first

    # Several members fit equally badly: report what they agree on.
    unknown = [{e.data_path for e in errs if e.type == "extra_forbidden"} for errs in tied.values()]
    common = set.intersection(*unknown)
    if common:
        keys: set[str] = set()
        for errs in tied.values():
            for e in errs:
                if e.type == "extra_forbidden" and e.data_path in common:
                    keys.update(_model_keys(e.parent))
        seen = {}
        for e in first:
            if e.type == "extra_forbidden" and e.data_path in common:
                seen[e.data_path] = replace(e, candidates=tuple(sorted(keys)))
        return list(seen.values())
    all_missing = all(e.type == "missing" and len(e.data_path) == depth + 1
                      for errs in tied.values() for e in errs)
    if all_missing:
        names = [str(e.data_path[-1]) for errs in tied.values() for e in errs]
        return [_Located("custom", f"missing key; expected one of {short_list(repr(n) for n in names)}",
                         point, (), None, None)]
    return first


def _strip_first_union(errs: list[_Located]) -> list[_Located]:
    return [replace(e, unions=e.unions[1:]) for e in errs]


# --------------------------------------------------------------------------- messages

def _message(err: _Located) -> str:
    kind = err.type
    if kind == "custom":
        return err.msg
    if kind == "missing":
        return "missing required key"
    if kind == "extra_forbidden":
        valid = list(err.candidates) if err.candidates is not None else _model_keys(err.parent)
        key = err.data_path[-1] if err.data_path else None
        close = suggest(key, valid)
        if close:
            return f"unknown key; did you mean {close!r}?"
        return f"unknown key; valid keys: {short_list(valid)}" if valid else "unknown key"
    if kind in _FRIENDLY_TYPE:
        hint = ""
        if err.input is None:
            hint = " (the value is empty)"
        elif kind == "string_type" and isinstance(err.input, (bool, int, float)):
            hint = " (put the value in quotes)"
        return f"expected {_FRIENDLY_TYPE[kind]}, got {yaml_type(err.input)}{hint}"
    if kind == "literal_error":
        expected = re.findall(r"'([^']*)'", str((err.ctx or {}).get("expected", "")))
        close = suggest(err.input, expected)
        hint = f"; did you mean {close!r}?" if close else ""
        return f"{err.msg}; got {_short_repr(err.input)}{hint}"
    if kind == "finite_number":
        return f"{_number(err.input)} is not a number GripProbe can use; write a finite number (not .nan or .inf)"
    if kind in _RANGE_ERRORS or (kind in ("float_type", "float_parsing") and type(err.input) is int):
        # an integer too large for a float lands here too
        return f"{_number(err.input)} is out of range; give {_range_text(err)}"
    if kind in ("value_error", "assertion_error"):
        return err.msg.split(", ", 1)[1] if ", " in err.msg else err.msg
    if kind.endswith("_type") or kind.endswith("_parsing"):
        return f"{err.msg}; got {yaml_type(err.input)}"
    return err.msg


_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
_BOUND_WORDS = (("gt", "greater than"), ("ge", "at least"), ("lt", "less than"), ("le", "at most"))


def _number(value: Any) -> str:
    """A number as the author wrote it in YAML: ``.nan``, ``.inf``, ``1e+308``, ``42``."""
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return f"{value:g}"
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def _range_text(err: _Located) -> str:
    """``a number greater than 0 and at most 86,400``: every bound of the field, else the one that failed."""
    bounds: dict[str, Any] = {}
    base: Any = None
    field = None
    if isinstance(err.parent, type) and issubclass(err.parent, BaseModel) and err.data_path \
            and isinstance(err.data_path[-1], str):
        field = err.parent.model_fields.get(err.data_path[-1])
    if field is not None:
        base = _collect_bounds([field, field.annotation], bounds)
    if not bounds:
        bounds = {k: v for k, v in (err.ctx or {}).items() if k in dict(_BOUND_WORDS)}
    words = [f"{word} {_plain(bounds[name])}" for name, word in _BOUND_WORDS if name in bounds]
    whole = base is int or (base is None and isinstance(err.input, int))
    return f"{'a whole number' if whole else 'a number'} {' and '.join(words)}"


def _collect_bounds(items: list[Any], bounds: dict[str, Any]) -> Any:
    """Gather ``gt``/``ge``/``lt``/``le`` from field infos, ``Annotated`` metadata and optional unions;
    return the plain type underneath (``int``, ``float``)."""
    base = None
    for _ in range(20):
        if not items:
            break
        item = items.pop(0)
        for name, _word in _BOUND_WORDS:
            if getattr(item, name, None) is not None:
                bounds.setdefault(name, getattr(item, name))
        items.extend(getattr(item, "metadata", None) or [])
        origin = typing.get_origin(item)
        if origin is typing.Annotated:
            args = typing.get_args(item)
            items.extend([args[0], *args[1:]])
        elif origin in (typing.Union, types.UnionType):
            items.extend(a for a in typing.get_args(item) if a is not type(None))
        elif item in (int, float):
            base = item
    return base


def _plain(bound: Any) -> str:
    if isinstance(bound, float) and bound.is_integer():
        bound = int(bound)
    return f"{bound:,}" if isinstance(bound, int) and abs(bound) >= 10_000 else str(bound)


def _short_repr(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else yaml_type(value)
    return text if len(text) <= 60 else text[:57] + "..."
