"""Redaction of proxy records: no API key, bearer token or password ever reaches an artifact.

Rules (applied by :class:`~.observe.ExchangeObserver` to everything it returns):

* Headers are never recorded at all. The *values* of the request's credential headers
  (``Authorization``, ``api-key``, ``x-api-key``, ``cookie``, ...) are collected as
  :func:`secrets_from_headers` and every occurrence of them (8 characters or longer) anywhere in a
  recorded string is replaced by ``[REDACTED]``.
* In bodies, the value of any key matching :data:`SECRET_KEY` (``api_key``, ``Authorization``,
  ``token``, ``client_secret``, ``password``, ``bearer`` ...) is replaced by ``[REDACTED]`` when it
  is a string; containers under such a key have all their strings redacted. Numbers, booleans and
  null are kept, so usage counters such as ``max_tokens: 4096`` stay readable.
* Any string that looks like a credential (:data:`SECRET_VALUE`: ``sk-…``, ``Bearer …``, GitHub,
  Slack, AWS and Google key shapes) has that part replaced by ``[REDACTED]``.
* A query string keeps its parameter names; values of secret-looking names (and ``key``) are
  redacted.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping
from urllib.parse import parse_qsl, quote

__all__ = ["REDACTED", "SECRET_HEADERS", "SECRET_KEY", "SECRET_VALUE", "Redactor", "redact_value",
           "secrets_from_headers"]

REDACTED = "[REDACTED]"
SECRET_KEY = re.compile(r"(api[_-]?key|authorization|token|secret|password|passwd|bearer|cookie|credential)", re.I)
SECRET_VALUE = re.compile(
    r"(?:\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/=\-]{4,}"
    r"|\bsk-[A-Za-z0-9_\-]{16,}"
    r"|\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|\bAIza[0-9A-Za-z_\-]{30,})"
)
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie",
                            "x-goog-api-key", "openai-api-key", "anthropic-api-key"})
_MIN_SECRET_LEN = 8


def secrets_from_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[str]:
    """Credential values carried by request headers (``Bearer x`` yields both ``Bearer x`` and ``x``)."""
    items = headers.items() if hasattr(headers, "items") else headers
    found: set[str] = set()
    try:
        for name, value in items:
            if not isinstance(name, str) or not isinstance(value, str):
                continue
            lname = name.lower()
            if lname not in SECRET_HEADERS and not SECRET_KEY.search(lname):
                continue
            value = value.strip()
            candidates = [value]
            if " " in value:
                candidates.append(value.split(None, 1)[1].strip())
            if lname == "cookie":
                candidates += [part.split("=", 1)[1].strip() for part in value.split(";") if "=" in part]
            found.update(c for c in candidates if len(c) >= _MIN_SECRET_LEN)
    except Exception:  # a strange header container must not cost the record
        pass
    return sorted(found, key=len, reverse=True)


#: Substrings one of which every :data:`SECRET_VALUE` match contains: a string holding none of them
#: cannot match, so the regex runs only on the few strings that might (this is the proxy's hot path).
_VALUE_HINTS = ("sk-", "earer", "EARER", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AKIA",
                "AIza")
#: No credential shape is shorter than this (``Bearer`` + space + 4, ``sk-`` + 16 ...).
_SHORTEST = min(_MIN_SECRET_LEN, 11)


class Redactor:
    """Redacts strings and JSON-like values; ``known`` are exact secret strings to remove too."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self.known = [k for k in known if isinstance(k, str) and len(k) >= _MIN_SECRET_LEN]
        self._secret_key: dict[str, bool] = {}

    def text(self, value: str) -> str:
        if len(value) < _SHORTEST:
            return value
        for secret in self.known:
            if secret in value:
                value = value.replace(secret, REDACTED)
        for hint in _VALUE_HINTS:
            if hint in value:
                return SECRET_VALUE.sub(REDACTED, value)
        return value

    def is_secret_key(self, key: str) -> bool:
        """Does this mapping key name a credential? (Cached: the same few keys repeat all over a body.)"""
        hit = self._secret_key.get(key)
        if hit is None:
            hit = self._secret_key[key] = SECRET_KEY.search(key) is not None
        return hit

    def value(self, obj: Any, *, under_secret: bool = False, depth: int = 0) -> Any:
        """A redacted copy of a JSON-like value (dicts, lists, strings, scalars)."""
        if isinstance(obj, str):
            return REDACTED if (under_secret and obj) else self.text(obj)
        if depth > 200:
            return REDACTED if under_secret else obj
        if isinstance(obj, dict):
            out: dict[Any, Any] = {}
            for key, val in obj.items():
                secret = under_secret or (isinstance(key, str) and self.is_secret_key(key))
                out[self.text(key) if isinstance(key, str) else key] = self.value(
                    val, under_secret=secret, depth=depth + 1)
            return out
        if isinstance(obj, (list, tuple)):
            return [self.value(v, under_secret=under_secret, depth=depth + 1) for v in obj]
        return obj

    def query(self, query: str) -> str:
        """A query string with secret parameter values redacted (names kept)."""
        if not query:
            return query
        try:
            pairs = parse_qsl(query, keep_blank_values=True)
        except ValueError:
            return self.text(query)
        if not pairs:
            return self.text(query)
        parts = []
        for name, value in pairs:
            if name.lower() == "key" or SECRET_KEY.search(name):
                value = REDACTED
            parts.append(f"{quote(self.text(name), safe='')}={quote(self.text(value), safe='[]')}")
        return "&".join(parts)


def redact_value(obj: Any, known: Iterable[str] = ()) -> Any:
    """Convenience: :meth:`Redactor.value` with a fresh redactor."""
    return Redactor(known).value(obj)
