"""Model servers GripProbe did not start: any OpenAI-compatible server, and Ollama.

Both are reached at a base URL (``--base-url`` or the spec's ``base_url``); :func:`server_root` drops a
trailing ``/v1``, since agents and proxies are handed the root. A probe is one listing request
(``GET /v1/models`` for an OpenAI-compatible server, ``GET /api/tags`` for Ollama); it never raises and
never prints or stores the API key.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from dataclasses import dataclass
from typing import Any

from ..drivers import BackendPhase, ListedModel, ToolCallProbe
from ..models.results import BackendProbe
from ..timeutil import utc_now_iso

MAX_LISTING_BYTES = 16 * 1024 * 1024


def server_root(url: str) -> str:
    """``http://host:port/v1/`` → ``http://host:port``: the root the runner hands to agents and proxies."""
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def shown_url(url: str) -> str:
    """``url`` without user:password, for messages and records."""
    from yarl import URL

    try:
        u = URL(url)
        return str(u.with_user(None)) if u.user or u.password else url
    except (ValueError, TypeError):
        return url


@dataclass(frozen=True)
class RemoteEndpoint:
    """A server that is already running: nothing to start or stop."""

    base_url: str

    async def close(self) -> None:
        return None


class _Listing:
    """A backend whose health check is its model listing at ``path`` (a JSON object with a ``key`` list)."""

    kind = ""
    description = ""
    remote = True
    path = ""
    key = ""

    async def open(self, phase: BackendPhase) -> RemoteEndpoint:
        return RemoteEndpoint(server_root(phase.url or phase.spec.base_url or ""))

    async def probe(self, url: str, *, api_key: str | None = None, backend_id: str = "",
                    timeout_s: float = 5.0) -> BackendProbe:
        """List the models at ``url`` once. Reachable means a 2xx answer whose body is the listing's JSON
        within ``timeout_s``; anything else is unreachable with ``problem`` and ``error`` saying why."""
        import aiohttp

        target = server_root(url) + self.path
        out: dict[str, Any] = {"backend_id": backend_id, "kind": self.kind, "url": shown_url(target),
                               "reachable": False}
        t0 = time.monotonic()
        try:
            status, body = await _get(target, api_key, timeout_s)
            out["http_status"] = status
            out.update(_judge(status, body, self.key))
        except asyncio.TimeoutError:
            out.update(problem="timeout", error=f"no answer within {timeout_s:g} s")
        except aiohttp.ClientConnectorDNSError:
            out.update(problem="dns", error="host name not found (DNS)")
        except aiohttp.ClientConnectorError as exc:
            refused = isinstance(exc.os_error, ConnectionRefusedError)
            out.update(problem="connect", error="connection refused" if refused else f"cannot connect: {exc.os_error}")
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError, ValueError):
            out.update(problem="url", error="not an http(s) URL")
        except (aiohttp.ClientError, OSError, socket.error) as exc:
            out.update(problem="connect", error=f"{type(exc).__name__}: {exc}"[:300])
        out["latency_ms"] = round((time.monotonic() - t0) * 1000, 1)
        out["checked_at"] = utc_now_iso()
        return BackendProbe.model_validate(out)

    async def list_models(self, url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> list[ListedModel]:
        return await _listing(server_root(url), api_key, timeout_s, [(self.path, self.key)])


class OpenAICompatibleBackend(_Listing):
    """Any OpenAI-compatible server (vLLM, llama.cpp's llama-server, LiteLLM, LM Studio, Ollama's /v1 ...)."""

    kind = "openai-compatible"
    description = "any OpenAI-compatible server at base_url (GET /v1/models as its health check)"
    path, key = "/v1/models", "data"

    async def list_models(self, url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> list[ListedModel]:
        """``/api/tags`` first (a server that also speaks Ollama's API says digests there), then ``/v1/models``."""
        return await _listing(server_root(url), api_key, timeout_s, [("/api/tags", "models"), (self.path, self.key)])

    async def probe_tool_call(self, url: str, *, model_id: str, api_key: str | None = None,
                              timeout_s: float = 120.0) -> ToolCallProbe:
        """``POST /v1/chat/completions`` offering one tool (``gripprobe doctor --model``; backends/toolprobe.py)."""
        from dataclasses import replace

        from .toolprobe import chat_completions_request, judge_chat_completions, post_probe

        probe = await post_probe(url, "/v1/chat/completions", chat_completions_request(model_id),
                                 judge_chat_completions, api_key=api_key, timeout_s=timeout_s)
        if probe.outcome == "text":  # llama-server says whether its template does tool calls
            probe = replace(probe, server_tool_template=await template_supports_tools(url, api_key))
        return probe


async def probe_served_by(server: Any, *, model_id: str, timeout_s: float, endpoint: str) -> ToolCallProbe:
    """doctor's tool-call probe against a server the harness starts itself (the oracle, a replay): ``server``
    has ``start()``, ``stop()`` and ``base_url``; started, probed through its Chat Completions endpoint, stopped.
    ``endpoint`` names it in the answer."""
    from dataclasses import replace

    await server.start()
    try:
        probe = await OpenAICompatibleBackend().probe_tool_call(server.base_url, model_id=model_id, timeout_s=timeout_s)
    finally:
        await server.stop()
    return replace(probe, endpoint=endpoint)


async def template_supports_tools(url: str, api_key: str | None, timeout_s: float = 5.0) -> bool | None:
    """llama-server's ``GET /props`` → ``chat_template_caps.supports_tool_calls`` (None when the server has no
    such page or does not say: another server, an older build)."""
    import json

    try:
        status, body = await _get(server_root(url) + "/props", api_key, timeout_s)
        caps = json.loads(body).get("chat_template_caps") if status == 200 else None
    except Exception:  # noqa: BLE001 - any failure means the server did not say
        return None
    value = caps.get("supports_tool_calls") if isinstance(caps, dict) else None
    return value if isinstance(value, bool) else None


class OllamaBackend(_Listing):
    """An Ollama server (native API; its digests are the model hashes)."""

    kind = "ollama"
    description = "an Ollama server at base_url (GET /api/tags as its health check; digests as model hashes)"
    path, key = "/api/tags", "models"

    async def probe_tool_call(self, url: str, *, model_id: str, api_key: str | None = None,
                              timeout_s: float = 120.0) -> ToolCallProbe:
        """``POST /api/chat`` offering one tool (``gripprobe doctor --model``; backends/toolprobe.py)."""
        from .toolprobe import judge_ollama_chat, ollama_chat_request, post_probe

        return await post_probe(url, "/api/chat", ollama_chat_request(model_id), judge_ollama_chat,
                                api_key=api_key, timeout_s=timeout_s)


class AnthropicBackend(_Listing):
    """A server speaking Anthropic's Messages API (Ollama 0.14+, llama.cpp's llama-server, vLLM, or a
    gateway): what Claude Code talks to. ``base_url`` is the server root (agents post ``/v1/messages``)."""

    kind = "anthropic"
    description = ("a server speaking Anthropic's Messages API at base_url (Ollama, llama-server, vLLM; "
                   "GET /v1/models as its health check)")
    path, key = "/v1/models", "data"

    async def list_models(self, url: str, *, api_key: str | None = None, timeout_s: float = 5.0) -> list[ListedModel]:
        """``/api/tags`` first (Ollama says digests there), then ``/v1/models``."""
        return await _listing(server_root(url), api_key, timeout_s, [("/api/tags", "models"), (self.path, self.key)])

    async def probe_tool_call(self, url: str, *, model_id: str, api_key: str | None = None,
                              timeout_s: float = 120.0) -> ToolCallProbe:
        """``POST /v1/messages`` offering one tool (``gripprobe doctor --model``; backends/toolprobe.py); the key
        goes as ``x-api-key`` too, as Anthropic's clients send it."""
        from .toolprobe import anthropic_messages_request, judge_anthropic_messages, post_probe

        extra = {"anthropic-version": "2023-06-01", **({"x-api-key": api_key} if api_key else {})}
        return await post_probe(url, "/v1/messages", anthropic_messages_request(model_id), judge_anthropic_messages,
                                api_key=api_key, timeout_s=timeout_s, headers=extra)


async def _get(url: str, api_key: str | None, timeout_s: float) -> tuple[int, bytes]:
    import aiohttp

    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
        async with session.get(url, headers=headers, allow_redirects=True) as resp:
            return resp.status, await resp.content.read(MAX_LISTING_BYTES + 1)


def _judge(status: int, body: bytes, key: str) -> dict[str, Any]:
    if status in (401, 403):
        return {"problem": "auth", "error": f"HTTP {status} (the server wants a valid API key)"}
    if not 200 <= status < 300:
        return {"problem": "http", "error": f"HTTP {status}"}
    if len(body) > MAX_LISTING_BYTES:
        return {"problem": "body", "error": f"the listing is over {MAX_LISTING_BYTES >> 20} MiB"}
    try:
        data = json.loads(body)
    except ValueError:
        return {"problem": "body", "error": "the answer is not JSON"}
    listed = data.get(key) if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return {"problem": "body", "error": f"the answer is not a model list (no {key!r} list)"}
    return {"reachable": True, "models": len(listed)}


async def _listing(root: str, api_key: str | None, timeout_s: float, paths: list[tuple[str, str]]) -> list[ListedModel]:
    """The first listing among ``paths`` that answers, as :class:`ListedModel`s; LookupError naming each
    failure when none does."""
    import aiohttp

    errors = []
    for path, key in paths:
        try:
            status, body = await _get(root + path, api_key, timeout_s)
            judged = _judge(status, body, key)
            if not judged.get("reachable"):
                raise LookupError(judged["error"])
            return [m for m in map(_listed, json.loads(body)[key]) if m is not None]
        except (aiohttp.ClientError, asyncio.TimeoutError, LookupError, ValueError, OSError) as exc:
            errors.append(f"GET {shown_url(root + path)}: {type(exc).__name__}: {exc}")
    raise LookupError("; ".join(errors)[:600])


def _listed(item: Any) -> ListedModel | None:
    if not isinstance(item, dict):
        return None
    name = item.get("name") or item.get("model") or item.get("id")
    if not isinstance(name, str) or not name:
        return None
    digest = item.get("digest")
    if isinstance(digest, str) and digest:
        digest = digest if ":" in digest else f"sha256:{digest}"
    else:
        digest = None
    return ListedModel(name, digest)
