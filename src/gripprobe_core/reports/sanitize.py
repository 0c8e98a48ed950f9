"""Sanitization for published reports: no home path, user name, host name, address or secret survives.

Raw ``results/runs/*`` is internal; anything copied from it into a report meant for publication goes
through a :class:`Sanitizer` first (SPEC §7, §9). Rules, applied in this order:

1. Credentials: every shape :data:`~gripprobe_core.proxy.redact.SECRET_VALUE` knows (``sk-…``,
   ``Bearer …``, GitHub, Slack, AWS, Google keys), JSON web tokens, and the value of a ``name=value`` /
   ``name: value`` pair whose name ends in a secret word (``api_key``, ``OPENAI_API_KEY``, ``token``,
   ``password``, ``Authorization`` …; numbers and booleans are kept) become ``[REDACTED]``.
2. Free text only (:meth:`Sanitizer.text`): any run of 32 or more token characters that is all hex or
   mixes upper case, lower case and digits becomes ``[REDACTED]``. Names (:meth:`Sanitizer.name`: agent,
   model, version, hash, hardware ids) skip this rule, so model hashes and long model ids stay readable.
3. E-mail addresses become ``<email>``.
4. Home directories: ``$HOME`` of the current user, ``/home/<name>``, ``/Users/<name>``, ``/root`` and
   ``C:\\Users\\<name>`` become ``~``.
5. Addresses: non-loopback IPv4 and IPv6 addresses become ``<ip>``; loopback and unspecified addresses
   stay, but the port after a loopback address becomes ``<port>`` (ports are random per run).
6. The current user name and host name (as whole words, any case) become ``<user>`` and ``<host>``.

Every rule leaves the placeholders alone and the rules repeat until the text stops changing, so
sanitizing twice changes nothing; no input raises.
"""

from __future__ import annotations

import getpass
import ipaddress
import os
import re
import socket
from typing import Any

from ..proxy.redact import REDACTED, SECRET_VALUE

__all__ = ["REDACTED", "Sanitizer", "current_sanitizer", "sanitize_text"]

_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
_SECRET_WORD = (r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|key|token|access[_-]?token"
                r"|auth[_-]?token|refresh[_-]?token|secret|client[_-]?secret|password|passwd|pwd|authorization"
                r"|proxy-authorization|credentials?|cookie)")
#: ``NAME<sep>VALUE`` where NAME ends in a secret word as a whole segment (``OPENAI_API_KEY`` yes,
#: ``monkey`` no). An ``Authorization`` value may be a scheme and a credential (``Basic dXNl…``).
_KEY_VALUE = re.compile(
    r"(?<![\w.-])((?:[\w.-]*[._-])?" + _SECRET_WORD + r")(\s*[:=]\s*)(\"?)([^\s\"',;&]+)"
    r"(?:(\s+)([^\s\"',;&]{4,}))?", re.I)
_HARMLESS_VALUE = re.compile(r"^(?:-?\d+(?:\.\d+)?|true|false|null|none)$", re.I)
_TOKEN_RUN = re.compile(r"(?<![A-Za-z0-9+_=-])[A-Za-z0-9+_=-]{32,}(?![A-Za-z0-9+_=-])")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![\w-])")
_HOME_NAMED = re.compile(r"/(?:home|Users)/[^/\s~'\"`<>|:;,()\[\]{}]+")
_ROOT_HOME = re.compile(r"(?<![\w.~-])/root(?![\w.-])")
_WINDOWS_HOME = re.compile(r"\b[A-Za-z]:\\Users\\[^\\\s'\"`<>|:;,]+", re.I)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?<![\w.])({_OCTET}(?:\.{_OCTET}){{3}})(?![\w]|\.\d)(:\d{{1,5}}(?!\d))?")
_IPV6 = re.compile(r"(?<![\w:.])([0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7})(?![\w:]|\.\d)")
_LOCAL_PORT = re.compile(r"((?<![\w.-])localhost|\[::1\]):\d{1,5}(?!\d)", re.I)
#: Placeholder characters: a name next to one of these is part of a placeholder, not a match.
_LEFT, _RIGHT = r"(?<![\w<\[])", r"(?![\w>\]])"
_CACHE_LIMIT = 100_000
_MAX_PASSES = 8


def _key_value(m: re.Match[str]) -> str:
    name, sep, quote, value, gap, more = m.groups()
    authorization = "authorization" in name.lower()
    if value == REDACTED or (_HARMLESS_VALUE.match(value) and not authorization):
        return m.group(0)
    tail = "" if authorization or gap is None else gap + more
    return f"{name}{sep}{quote}{REDACTED}{tail}"


def _token_run(m: re.Match[str]) -> str:
    s = m.group(0)
    if _HEX.match(s):
        return REDACTED
    if any(c.isdigit() for c in s) and any(c.islower() for c in s) and any(c.isupper() for c in s):
        return REDACTED
    return s


def _home_named(m: re.Match[str]) -> str:
    start = m.start()
    before = m.string[start - 1] if start else ""
    # "/home/bob/x" → "~/x"; "a/home/bob" (a folder called home inside another path) → "a/~".
    return "~" if not before or before.isspace() or before in "\"'`=:([{<,;|" else "/~"


def _ipv4(m: re.Match[str]) -> str:
    addr, port = m.group(1), m.group(2) or ""
    ip = ipaddress.IPv4Address(addr)
    if ip.is_loopback or ip.is_unspecified:
        return addr + (":<port>" if port else "")
    return "<ip>" + port


def _ipv6(m: re.Match[str]) -> str:
    text = m.group(1)
    if text.count(":") < 2:
        return text
    try:
        ip = ipaddress.IPv6Address(text)
    except ValueError:
        return text
    return text if (ip.is_loopback or ip.is_unspecified) else "<ip>"


def _word(name: str) -> re.Pattern[str] | None:
    name = name.strip()
    if len(name) < 2 or name.lower() == "localhost":
        return None
    return re.compile(_LEFT + re.escape(name) + _RIGHT, re.I)


class Sanitizer:
    """Applies the module's rules for the given ``user``, ``host`` and ``home`` (see
    :func:`current_sanitizer` for this machine's); ``extra_words`` are further whole words to redact."""

    def __init__(self, *, user: str | None = None, host: str | None = None, home: str | None = None,
                 extra_words: tuple[str, ...] = ()) -> None:
        self.user = user
        self.host = host
        self.home = home.rstrip("/\\") if home else None
        hosts = [host] if host else []
        if host and "." in host:
            hosts.append(host.split(".", 1)[0])
        self._home = None
        if self.home and self.home.count("/") + self.home.count("\\") >= 1 and len(self.home) >= 3:
            self._home = re.compile(r"(?<![\w.~-])" + re.escape(self.home) + r"(?![\w.-])")
        self._names: list[tuple[re.Pattern[str], str]] = []
        for words, placeholder in ((hosts, "<host>"), ([user] if user else [], "<user>"),
                                   (list(extra_words), REDACTED)):
            for w in sorted(words, key=len, reverse=True):
                pattern = _word(w)
                if pattern is not None:
                    self._names.append((pattern, placeholder))
        self._cache: dict[tuple[bool, str], str] = {}

    def text(self, value: str) -> str:
        """Free text (messages, reasons, command lines): every rule."""
        return self._sanitize(value, free=True)

    def name(self, value: str) -> str:
        """An identifier or version: every rule but the generic long-token one (keeps hashes)."""
        return self._sanitize(value, free=False)

    def value(self, obj: Any) -> Any:
        """A sanitized copy of a JSON-like value: :meth:`text` on every string, keys included."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.value(v) for v in obj]
        return obj

    def _sanitize(self, value: str, *, free: bool) -> str:
        if not isinstance(value, str) or not value:
            return value
        key = (free, value)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = self._apply(value, free=free)
        if len(self._cache) < _CACHE_LIMIT:
            self._cache[key] = out
        return out

    def _apply(self, s: str, *, free: bool) -> str:
        # One replacement can expose another (an address replaced next to "/root" makes it a path start),
        # so passes repeat until nothing changes; that is what makes sanitizing twice a no-op.
        for _ in range(_MAX_PASSES):
            out = self._pass(s, free=free)
            if out == s:
                break
            s = out
        return s

    def _pass(self, s: str, *, free: bool) -> str:
        s = SECRET_VALUE.sub(REDACTED, s)
        s = _JWT.sub(REDACTED, s)
        s = _KEY_VALUE.sub(_key_value, s)
        if free:
            s = _TOKEN_RUN.sub(_token_run, s)
        s = _EMAIL.sub("<email>", s)
        if self._home is not None:
            s = self._home.sub("~", s)
        s = _HOME_NAMED.sub(_home_named, s)
        s = _ROOT_HOME.sub("~", s)
        s = _WINDOWS_HOME.sub("~", s)
        s = _IPV4.sub(_ipv4, s)
        if ":" in s:
            s = _IPV6.sub(_ipv6, s)
            s = _LOCAL_PORT.sub(r"\1:<port>", s)
        for pattern, placeholder in self._names:
            s = pattern.sub(placeholder, s)
        return s


def _safe(fn: Any) -> str | None:
    try:
        return fn() or None
    except Exception:  # no user database entry, no hostname: nothing to hide then
        return None


def current_sanitizer(extra_words: tuple[str, ...] = ()) -> Sanitizer:
    """A sanitizer for this machine: ``getpass.getuser()``, ``socket.gethostname()`` and ``$HOME``."""
    return Sanitizer(user=_safe(getpass.getuser), host=_safe(socket.gethostname),
                     home=_safe(lambda: os.path.expanduser("~")), extra_words=extra_words)


def sanitize_text(value: str) -> str:
    """Convenience: :meth:`Sanitizer.text` with this machine's sanitizer."""
    return current_sanitizer().text(value)
