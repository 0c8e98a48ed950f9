"""The model under test, pinned: which requests are model calls, and whether one names the case's model.

The recording proxy of a case serves one model: the name the agent was given, the backend's
``model_id``, and the aliases the agent's driver declares for side requests configured to the same
model (``AgentDriver.model_aliases``). :class:`ModelPin` decides, for each request before it is
forwarded, whether it is a **model call** and, if so, whether it names one of those.

A model call is a ``POST`` whose protocol (:func:`~.protocols.detect_protocol`, from the path, or for
an unknown path from the body's shape) is one of :data:`~.protocols.MODEL_PROTOCOLS`: Chat
Completions, the Responses API, Ollama's ``/api/chat`` and ``/api/generate``, and any POST whose JSON
body looks like one of them (a legacy ``/v1/completions`` body with ``model`` and ``prompt``, an
``input`` with a ``model`` …). A POST to a path naming a model as a path segment
(``…/deployments/<m>/…``, ``…/engines/<m>/…``, ``…/models/<m>…``, as some servers route) is a model call
too, and that segment must name the case's model as well.

A model call is refused (:meth:`ModelPin.refusal` returns why) when its body is not a JSON object, names
no ``model`` (or a ``model`` that is not a string), names one more than once at the top level (servers
disagree on which of two keys wins), or names any other model. The check costs one ``json.loads`` of
a model call's body (a second, slower one only when the body could spell ``model`` twice), nothing
for any other request.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .protocols import MODEL_PROTOCOLS, detect_protocol

__all__ = ["MODEL_NOT_UNDER_TEST", "ModelPin", "is_model_call"]

MODEL_NOT_UNDER_TEST = "model_not_under_test"
"""The ``x_gripprobe_proxy_error`` (and error code) of a model call refused for the model it names."""
_PATH_MODEL_SEGMENTS = ("deployments", "engines", "models")
_LISTING_TAILS = ("/api/show", "/api/tags", "/api/version", "/api/ps", "/models")


class _Duplicate(ValueError):
    pass


def _top_level_duplicate_model(body: bytes) -> bool:
    """Does the body's top-level object hold ``model`` more than once (in any spelling)?"""
    last_had_duplicate = [False]

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        # objects are built inside out: the top-level object's call is the last one
        last_had_duplicate[0] = sum(1 for k, _ in items if k == "model") > 1
        return out

    try:
        json.loads(body, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return False
    return last_had_duplicate[0]


def _classify(method: str, path: str, body: bytes) -> tuple[bool, Any, str | None]:
    """``(model call?, the body parsed when that took parsing, the model a path segment names)``."""
    if method.upper() != "POST":
        return False, None, None
    low = path.lower().rstrip("/")
    if low.endswith(_LISTING_TAILS):
        return False, None, None  # a model listing or description: not a call
    named_in_path = _path_model(path)
    if named_in_path is not None or detect_protocol(method, path) in MODEL_PROTOCOLS:
        return True, None, named_in_path
    if detect_protocol(method, path) != "other" or not body or body.lstrip()[:1] != b"{":
        return False, None, None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return False, None, None
    return detect_protocol(method, path, parsed) in MODEL_PROTOCOLS, parsed, None


def is_model_call(method: str, path: str, body: bytes) -> bool:
    """Is this request a model call (see the module docstring)? What the token budget counts."""
    return _classify(method, path, body)[0]


def _path_model(path: str) -> str | None:
    """The model a path names as a segment (``/openai/deployments/<m>/chat/completions``), if any."""
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts[:-1]):
        segment = part.lower()
        if segment in _PATH_MODEL_SEGMENTS:
            name = parts[i + 1]
            head, colon, verb = name.partition(":")
            if segment == "models" and colon and verb.lower().startswith(("generate", "stream", "count")):
                return head  # /v1beta/models/<m>:generateContent
            return name
    return None


class ModelPin:
    """The names a case's model goes by on the wire (see the module docstring)."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(n for n in names if isinstance(n, str) and n)
        if not self.names:
            raise ValueError("a model pin needs at least one model name")

    def __repr__(self) -> str:
        return f"ModelPin({sorted(self.names)!r})"

    def refusal(self, method: str, path: str, body: bytes) -> str | None:
        """Why this request may not be forwarded (a sentence), or ``None``: not a model call, or one
        naming the case's model."""
        call, parsed, named_in_path = _classify(method, path, body)
        if not call:
            return None
        if named_in_path is not None and named_in_path not in self.names:
            return self._other(named_in_path, "in its path")
        if parsed is None:
            try:
                parsed = json.loads(body) if body else None
            except (ValueError, RecursionError):
                parsed = None
        if not isinstance(parsed, dict):
            if named_in_path is not None:
                return None
            return "a model call whose body is not a JSON object names no model"
        model = parsed.get("model")
        if model is None and named_in_path is not None:
            return None
        if not isinstance(model, str) or not model:
            return "a model call must name the model under test in `model`"
        if (body.count(b'"model"') > 1 or b"\\u" in body) and _top_level_duplicate_model(body):
            return "a model call names `model` more than once"
        if model not in self.names:
            return self._other(model, "")
        return None

    def _other(self, model: str, where: str) -> str:
        shown = model if len(model) <= 80 else model[:80] + "…"
        served = ", ".join(sorted(self.names))
        return (f"this case's model is {served}; a call naming {shown!r}{' ' + where if where else ''} is not "
                f"forwarded (GripProbe serves an agent only the model under test)")
