"""HTTP/1.1 on the recording proxy's wire: a client's request as parsed, and the protocol's constants.

:class:`Request` is one client request as :class:`~.client.ClientConnection` parsed it (method, target,
raw headers, body), with lazily decoded views for the exchange's record and
:meth:`Request.upstream_bytes`, the bytes sent upstream for it. :func:`hop_by_hop` names the headers
never forwarded in either direction (RFC 9110 §7.6.1), :func:`error_body` is the JSON a fault is
answered with, and :data:`ERROR_STATUS` its status. No I/O here: the connections are
:mod:`.client` and :mod:`.upstream`, one exchange through them is :mod:`.relay`.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from multidict import CIMultiDict

if TYPE_CHECKING:
    from .exchange import Exchange

HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"proxy-connection", b"te",
    b"trailer", b"trailers", b"transfer-encoding", b"upgrade",
})
ERROR_STATUS = {"proxy_connect_error": 502, "upstream_reset": 502, "upstream_malformed": 502,
                "upstream_timeout": 504, "proxy_internal_error": 500, "request_body_too_large": 413,
                "token_budget_exceeded": 429, "model_not_under_test": 403}
TOKEN_BUDGET_EXCEEDED = "token_budget_exceeded"
TOO_LARGE = "request_body_too_large"
REASONS = {int(s): s.phrase.encode() for s in HTTPStatus}
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
"""The interim reply to a request that sent ``Expect: 100-continue``."""
_JOIN_BODY_LIMIT = 64 * 1024
"""Request bodies up to this size go upstream in one write with their head; larger ones in a second."""


def hop_by_hop(headers: list[tuple[bytes, bytes]]) -> frozenset[bytes]:
    """Lower-cased names not to forward: the hop-by-hop ones, and those ``Connection`` lists
    (RFC 9110 §7.6.1)."""
    extra = [t.strip().lower() for k, v in headers if k.lower() == b"connection" for t in v.split(b",")]
    return HOP_BY_HOP.union(t for t in extra if t) if extra else HOP_BY_HOP


def error_body(reason: str, message: str) -> bytes:
    """The proxy's own error: readable as an OpenAI error (``error.message``) and as an Anthropic one
    (``type: error`` with ``error.type`` and ``error.message``) alike."""
    return json.dumps({"type": "error", "error": {"message": message, "type": "proxy_error", "code": reason}}).encode()


class Request:
    """One client request as parsed. The decoded views (``path``, ``query_string``, ``headers``) are
    computed on first use, which is after the client has its first response bytes."""

    __slots__ = ("method", "target", "raw_headers", "body", "size", "too_large", "keep_alive", "http10",
                 "expect_continue", "exchange", "_url", "_headers")

    def __init__(self) -> None:
        self.method = "GET"
        self.target = b""
        self.raw_headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.size = 0
        """Body bytes received so far."""
        self.too_large = False
        """Its body is over the proxy's cap: it is answered 413, never relayed (its body is not kept)."""
        self.keep_alive = True
        self.http10 = False
        self.expect_continue = False
        self.exchange: Exchange | None = None
        self._url: Any = None
        self._headers: CIMultiDict[str] | None = None

    def _parsed_url(self) -> Any:
        if self._url is None:
            from yarl import URL
            try:
                self._url = URL(self.target.decode("latin-1"), encoded=True)
            except ValueError:
                self._url = URL("/")
        return self._url

    @property
    def path(self) -> str:
        """The path, percent-decoded (as aiohttp's ``request.path``)."""
        return self._parsed_url().path

    @property
    def query_string(self) -> str:
        return self._parsed_url().query_string

    @property
    def headers(self) -> CIMultiDict[str]:
        if self._headers is None:
            self._headers = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in self.raw_headers)
        return self._headers

    def whole_body(self) -> bytes:
        """The body as one bytes object (its parts are joined once)."""
        if len(self.body) != 1:
            self.body = [b"".join(self.body)]
        return self.body[0]

    def upstream_bytes(self, prefix: bytes, host: bytes) -> tuple[bytes, bytes]:
        """The request as sent upstream: the target under the upstream's path prefix, ``Host`` the
        upstream's, hop-by-hop headers, ``Host``, ``Content-Length`` and ``Expect`` dropped, the body
        whole with its ``Content-Length``. Returned as ``(head, b"")`` with a small body included in
        the head, else as ``(head, body)`` (a large body is not copied once more)."""
        drop = hop_by_hop(self.raw_headers)
        target = self.target
        if not target.startswith(b"/"):  # absolute form (as sent to a forward proxy): keep path and query
            scheme, sep, rest = target.partition(b"://")
            if sep and scheme.lower() in (b"http", b"https"):
                slash = rest.find(b"/")
                target = rest[slash:] if slash >= 0 else b"/"
        lines = [self.method.encode(), b" ", prefix, target, b" HTTP/1.1\r\nHost: ", host, b"\r\n"]
        for k, v in self.raw_headers:
            lk = k.lower()
            if lk in drop or lk in (b"host", b"content-length", b"expect") or lk.startswith(b"proxy-"):
                continue
            lines += (k, b": ", v, b"\r\n")
        body = self.whole_body()
        if body or self.method in ("POST", "PUT", "PATCH"):
            lines.append(b"Content-Length: %d\r\n" % len(body))
        lines.append(b"\r\n")
        if len(body) > _JOIN_BODY_LIMIT:
            return b"".join(lines), body
        lines.append(body)
        return b"".join(lines), b""
