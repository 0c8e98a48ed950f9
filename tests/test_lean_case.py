"""store/lean.py: the fast check of a stored case.json is never more lenient than the result model.

Every document the lean check accepts, ``CaseResult.model_validate_json`` accepts too: checked on a real case
(and one carrying every optional part) mutated field by field (each value replaced by values of other types and
out of range, each key dropped, an unknown key added). The mirror names the model's fields, so a field added
to models/results.py fails here until store/lean.py has it."""

from __future__ import annotations

import copy
import json
import typing
from pathlib import Path

import msgspec
import pytest
from pydantic import BaseModel

from gripprobe_core.models import bounds
from gripprobe_core.models.results import CaseResult
from gripprobe_core.store import lean
from gripprobe_core.store.lean import LeanCase, lean_case

from conftest import run_reference


@pytest.fixture(scope="module")
def real_case(tmp_path_factory) -> dict:
    results = tmp_path_factory.mktemp("lean")
    run_reference(results, tests=("save_file",))
    (path,) = (results / "runs").glob("*/cases/*/case.json")
    return json.loads(path.read_text())


def _full(real: dict) -> dict:
    """The real case with every optional part the contract has filled in (valid)."""
    d = copy.deepcopy(real)
    d["usage"] = {"source": "A", "model_calls": 2, "prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 1,
                  "total_tokens": 15, "ttft_ms": 3.5, "model_time_s": 0.2, "generation_s": 0.1,
                  "output_tokens_per_s": 50.0, "cost": 0.01, "currency": "USD"}
    d["placement"] = {"executor": "ray", "node_id": "n1", "node_ip": "10.0.0.1", "hostname": "h",
                      "attempts": [{"attempt": 1, "node_id": "n1", "error": None}]}
    d["interaction"] = {"policy": "manual", "how": "session", "applied": True, "reason": None, "denies": True,
                        "requests": 2, "allowed": 1, "denied": 1, "answered": 2, "violations": ["x"],
                        "excluded_from_scores": True}
    d["phases"][-1]["backend_probe"] = {"backend_id": "b", "kind": "ollama", "url": "http://127.0.0.1:1/api/tags",
                                        "reachable": True, "models": 3, "latency_ms": 1.5, "http_status": 200,
                                        "problem": None, "error": None, "checked_at": "2026-01-01T00:00:00Z"}
    d["phases"][-1]["challenge"] = {"token": "t", "nested": {"a": [1, 2.5, {"b": None}]}}
    d["evidence"] = {"artifacts/a": "sha256:00"}
    d["sandbox"] = "bwrap"
    d["warnings"] = ["kept_file_refused: x"]
    d["hardware_profile"] = "ci-2core"
    d["tags"] = ["sanity"]
    return d


def _model_ok(doc: dict) -> bool:
    try:
        CaseResult.model_validate_json(json.dumps(doc))
    except ValueError:
        return False
    return True


def _lean_ok(doc: dict) -> bool:
    return lean_case(json.dumps(doc).encode()) is not None


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _set(doc, path, value):
    target = doc
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value


def _delete(doc, path):
    target = doc
    for p in path[:-1]:
        target = target[p]
    del target[path[-1]]


REPLACEMENTS = [None, True, False, 0, 1, -1, 1.5, 5.0, 1e308, 10**18, 10**30, "", "x", "5", "ABC", "PASS", "a\n",
                "r\u0435ference", "oracle-\u202etcefrep", "save\u200b_file", "a" * 200, "USD", "ray", "measured",
                [], ["x"], [1], {}, {"x": 1}]


@pytest.mark.parametrize("which", ["real", "full"])
def test_the_lean_check_never_accepts_what_the_model_refuses(real_case, which):
    base = real_case if which == "real" else _full(real_case)
    assert _model_ok(base) and _lean_ok(base)
    tried = refused_by_both = 0
    looser = []  # (path, value): the model accepts, the lean check refuses (it is stricter: allowed, counted)
    for path in list(_paths(base))[1:]:
        variants = [("set", v) for v in REPLACEMENTS] + [("drop", None)]
        if isinstance(_get(base, path), dict):
            variants.append(("extra", None))
        for how, value in variants:
            doc = copy.deepcopy(base)
            if how == "set":
                _set(doc, path, value)
            elif how == "drop":
                if isinstance(path[-1], int):
                    continue
                _delete(doc, path)
            else:
                _set(doc, (*path, "not_in_the_contract"), 1)
            model, fast = _model_ok(doc), _lean_ok(doc)
            tried += 1
            assert not (fast and not model), f"lean accepts what the model refuses: {how} {path} = {value!r}"
            refused_by_both += not model and not fast
            if model and not fast:
                looser.append((path, how, value))
    assert tried > 2000 and refused_by_both > 1000
    # Where the model is more lenient it is only coercion the harness never writes: "5" or 5.0 for a number,
    # 0/1/"x" for a boolean (pydantic's lax mode), an int for a float's place is accepted by both.
    for path, how, value in looser:
        assert how == "set" and (isinstance(value, (bool, int, float, str)) and not isinstance(value, dict)), \
            (path, how, value)
        assert value in ("5", 5.0, 0, 1, True, False, 1.5, 10**18) or isinstance(_get(base, path), bool) \
            or isinstance(value, str) and value.isdigit(), (path, value)


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def test_free_form_objects_nest_at_most_64_deep_in_both(real_case):
    for depth, ok in ((62, True), (63, True), (64, False), (70, False)):
        doc = copy.deepcopy(real_case)
        tree: dict = {}
        node = tree
        for _ in range(depth):
            node["a"] = {}
            node = node["a"]
        doc["run_values"] = tree
        assert _model_ok(doc) is ok and _lean_ok(doc) is ok, depth


def test_the_old_name_of_run_values_is_read_and_both_names_refused(real_case):
    doc = copy.deepcopy(real_case)
    doc["run_context"] = doc.pop("run_values")
    assert _model_ok(doc) and _lean_ok(doc)
    doc["run_values"] = {}
    assert not _model_ok(doc) and not _lean_ok(doc)


def test_not_json_nan_huge_numbers_and_bad_bytes_are_refused_never_raised(real_case):
    text = json.dumps(real_case)
    for bad in (b"", b"{", b"[]", b"null", text.replace('"duration_s": ', '"duration_s": NaN, "x": ', 1).encode(),
                text.encode()[:-1], b"\xff" + text.encode(), text.replace('"trial": 1', '"trial": 1e400').encode(),
                b"[" * 100_000):
        assert lean_case(bad) is None


def _struct_fields(t) -> dict[str, bool]:
    """A msgspec struct's fields and whether each is required."""
    info = msgspec.inspect.type_info(t)
    return {f.name: f.required for f in info.fields}


def _model_fields(m: type[BaseModel]) -> dict[str, bool]:
    return {name: f.is_required() for name, f in m.model_fields.items()}


def _models_in(annotation) -> list[type[BaseModel]]:
    found = []
    for arg in typing.get_args(annotation) or (annotation,):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            found.append(arg)
        elif typing.get_args(arg):
            found += _models_in(arg)
    return found


def test_the_mirror_has_every_field_of_the_model_and_its_ranges():
    pairs = [(CaseResult, LeanCase)]
    seen = set()
    while pairs:
        model, struct = pairs.pop()
        if model in seen:
            continue
        seen.add(model)
        want, have = _model_fields(model), _struct_fields(struct)
        if model is CaseResult:
            assert have.pop("run_context") is False  # the old name of run_values, read as the model reads it
        assert have == want, model.__name__
        for name, f in model.model_fields.items():
            for sub in _models_in(f.annotation):
                pairs.append((sub, getattr(lean, sub.__name__)))
    assert len(seen) >= 12
    assert (lean._TRIALS_MAX, lean._COUNT_MAX, lean._SECONDS_MAX, lean._COST_MAX, lean._DEPTH_MAX) == (
        bounds.TRIALS_MAX, bounds.COUNT_MAX, bounds.SECONDS_MAX, bounds.COST_MAX, bounds.JSON_DEPTH_MAX)
    from gripprobe_core.models.ids import ID_MAX, ID_PATTERN

    assert lean._ID == ID_PATTERN.removesuffix("$") + r"\Z"
    assert {ID_MAX[k] for k in ("agent", "backend")} == {32} and ID_MAX["format"] == 16
    assert {ID_MAX[k] for k in ("model", "test")} == {64}


def test_a_real_case_reads_the_same_facts_as_the_model(real_case):
    from gripprobe_core.reports.aggregate import facts_of

    for doc in (real_case, _full(real_case)):
        data = json.dumps(doc).encode()
        assert facts_of(lean_case(data), "hw", "f") == facts_of(CaseResult.model_validate_json(data), "hw", "f")

