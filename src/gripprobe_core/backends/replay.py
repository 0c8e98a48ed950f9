"""The replay backend (``kind: replay``): a recorded real-model session served back, so a run with a real
model can be repeated anywhere, in CI included, with no model and no server.

A recording is a folder of case files written by ``scripts/real_model.py record`` from a real run's proxy
records (docs/backends.md, "Replaying a recorded model"). Each holds the exchanges of one case in order: the
request's *conversation* in a canonical, scrubbed form and the response exactly as the server sent it (its
SSE events, NDJSON lines or JSON body). Opened for a phase, the backend serves on 127.0.0.1 and answers each
request with the recorded response of the same conversation:

* **the conversation** is every message in order: its role; system, user and assistant text with this
  machine's paths replaced by placeholders (:func:`scrub`), runs of digits as ``0`` (dates, times, ports, ids)
  and runs of white space as one space; the assistant's tool calls by name and canonical arguments; and a
  tool's result as the mark ``<tool result>`` only (what a tool printed — a date, a listing — is the
  machine's, not the model's). The offered tools and sampling options are not part of it.
* equal conversations recorded more than once (an agent repeating itself) are served in recorded order.
* a request the real server had not answered when its phase ended (the timeout) is held until this phase
  ends too.
* a request with no recorded conversation gets HTTP 409 with a JSON error whose message starts with
  ``replay_mismatch:`` and names the nearest recorded conversation and the first message that differs; the
  same line goes to the phase's ``replay.<phase>.jsonl`` in the case's artifacts and to the case's warnings.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..drivers import BackendPhase, ListedModel, ToolCallProbe
from ..models.results import BackendProbe
from ..phase import SEEN_ROOT
from ..timeutil import utc_now_iso

#: The recording's case files (``<agent>__<test>__<format>.json``) and its description.
CASE_GLOB = "*__*.json"
MANIFEST = "recording.json"
#: The exchange of ``gripprobe doctor --model``'s tool-call probe, asked of the real server when recording.
DOCTOR_FILE = "doctor__toolprobe__chat.json"
FORMAT_VERSION = 1
TOOL_RESULT = "<tool result>"
MISMATCH = "replay_mismatch"
#: A recorded exchange's status when the server had not answered when the phase ended (its timeout): the
#: replay holds such a request until the phase ends the same way.
NO_ANSWER = 0
#: A recording larger than this is refused (a folder of a few dozen cases is well under it).
MAX_RECORDING_BYTES = 64 * 1024 * 1024
#: What one phase keeps of an agent that keeps asking what the recording does not hold: the first mismatches
#: in full, then only their count (in memory and in ``replay.<phase>.jsonl``, which has at most MAX_LOG_LINES).
MAX_MISMATCHES = 20
MAX_LOG_LINES = 1000

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


# ------------------------------------------------------------------------------------------ canonical form

def scrub_pairs(extra: Iterable[tuple[str, str]] = ()) -> list[tuple[str, str]]:
    """(this machine's text, placeholder) pairs, longest first: the checkout, the agents' cache, HOME, the
    temporary folder, the kernel's release and build. A recording made on one machine and replayed on another
    then reads the same."""
    pairs = list(extra)
    checkout = Path(__file__).resolve().parents[3]
    pairs.append((str(checkout), "<checkout>"))
    pairs.append((str(Path(sys.prefix).resolve()), "<python>"))
    pairs.append((str(Path(sys.base_prefix).resolve()), "<python-base>"))
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    pairs.append((cache, "<cache>"))
    pairs.append((str(Path.home()), "<home>"))
    tmp = os.environ.get("TMPDIR") or "/tmp"
    pairs.append((str(Path(tmp).resolve()) + "/gripprobe-", "<tmp>/gripprobe-"))
    # agents tell their model the machine they run on (mini-swe-agent: `uname -srvm`): the kernel's release and
    # build are this machine's, not the model's (the host name is left: too short to replace safely)
    release, build = platform.release(), platform.version()
    if len(release) >= 4:
        pairs.append((release, "<kernel-release>"))
    if len(build) >= 8:
        pairs.append((build, "<kernel-build>"))
    seen: set[str] = set()
    out = []
    for real, mark in sorted(pairs, key=lambda p: -len(p[0])):
        if len(real) > 1 and real not in seen:
            seen.add(real)
            out.append((real, mark))
    return out


def scrub(text: str, pairs: list[tuple[str, str]]) -> str:
    """``text`` with every path of ``pairs`` replaced by its placeholder (the sandbox's own path for the phase's
    folder, the same on every machine, stays as it is)."""
    seen = str(SEEN_ROOT)
    keep = seen in text
    if keep:
        text = text.replace(seen, "\x00seen\x00")
    for real, mark in pairs:
        if real in text:
            text = text.replace(real, mark)
    return text.replace("\x00seen\x00", seen) if keep else text


def _norm(text: str, pairs: list[tuple[str, str]]) -> str:
    return _SPACE.sub(" ", _DIGITS.sub("0", scrub(text, pairs))).strip()


def _text_of(content: Any) -> tuple[str, list[list[str]], bool]:
    """(text, tool calls, holds a tool result) of a message's content in any of the wires' shapes."""
    if content is None:
        return "", [], False
    if isinstance(content, str):
        return content, [], False
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, sort_keys=True, default=str), [], False
    texts: list[str] = []
    calls: list[list[str]] = []
    result = False
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("tool_result", "function_call_output"):
            result = True
        elif kind in ("tool_use", "function_call"):
            calls.append([str(part.get("name")), _args(part.get("input", part.get("arguments")))])
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part.get("content"), str):
            texts.append(part["content"])
    return "\n".join(texts), calls, result


def _args(value: Any) -> str:
    """Tool-call arguments in one canonical JSON text (a JSON string is parsed first)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value.strip()
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _messages(body: Any) -> list[Any]:
    """The conversation's messages of any wire: chat ``messages``, Anthropic ``system`` + ``messages``,
    Responses ``instructions`` + ``input``, Ollama ``messages`` or ``prompt``."""
    if not isinstance(body, dict):
        return [{"role": "body", "content": body if isinstance(body, str) else json.dumps(body, default=str)}]
    out: list[Any] = []
    if body.get("system") is not None:
        out.append({"role": "system", "content": body["system"]})
    if body.get("instructions") is not None:
        out.append({"role": "system", "content": body["instructions"]})
    for key in ("messages", "input"):
        value = body.get(key)
        if isinstance(value, list):
            out.extend(value)
        elif isinstance(value, str):
            out.append({"role": "user", "content": value})
    if isinstance(body.get("prompt"), str):
        out.append({"role": "user", "content": body["prompt"]})
    return out


def conversation(body: Any, pairs: list[tuple[str, str]]) -> list[list[Any]]:
    """A request's conversation in the canonical form the module docstring describes: one
    ``[role, text, tool calls]`` per message."""
    out: list[list[Any]] = []
    for msg in _messages(body):
        if not isinstance(msg, dict):
            out.append(["?", _norm(str(msg), pairs), []])
            continue
        role = str(msg.get("role") or msg.get("type") or "?")
        text, calls, result = _text_of(msg.get("content"))
        if msg.get("type") in ("function_call_output",) or role in ("tool", "function") or result:
            out.append([role, TOOL_RESULT, []])
            continue
        if msg.get("type") == "function_call":
            calls.append([str(msg.get("name")), _args(msg.get("arguments"))])
        listed = msg.get("tool_calls")
        for call in listed if isinstance(listed, list) else []:
            if isinstance(call, dict):
                inner = call.get("function")
                fn: dict[str, Any] = inner if isinstance(inner, dict) else call
                calls.append([str(fn.get("name")), _args(fn.get("arguments"))])
        out.append([role, _norm(text, pairs), calls])
    return out


def conversation_key(path: str, conv: list[list[Any]]) -> str:
    """The hash a recorded exchange is found by: its path's endpoint and its conversation."""
    endpoint = path.split("?", 1)[0].rstrip("/")
    data = json.dumps([endpoint, conv], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def first_difference(a: list[list[Any]], b: list[list[Any]]) -> str:
    """Where two conversations part, in words (for a mismatch's message)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            what = "role" if x[0] != y[0] else "tool calls" if x[2] != y[2] else "text"
            got, want = (x[0], y[0]) if what == "role" else (x[2], y[2]) if what == "tool calls" else (x[1], y[1])
            return f"message {i + 1} ({x[0]}) differs in its {what}: {_clip(got)} where the recording has {_clip(want)}"
    if len(a) != len(b):
        return f"the request has {len(a)} message(s) where the recording has {len(b)}"
    return "the endpoint differs"


def _clip(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return repr(text if len(text) <= limit else text[:limit] + "…")


# ------------------------------------------------------------------------------------------ the recording

class RecordingError(ValueError):
    """A recording folder that cannot be served (missing, unreadable, malformed): one line, what and where."""


@dataclass(frozen=True)
class Exchange:
    """One recorded request and what the server answered."""

    case: str
    index: int
    path: str
    conversation: list[list[Any]]
    status: int
    stream: bool
    response: Any
    content_type: str

    @property
    def key(self) -> str:
        return conversation_key(self.path, self.conversation)


@dataclass
class Recording:
    """Every exchange of a recording folder, found by conversation."""

    folder: Path
    exchanges: list[Exchange] = field(default_factory=list)
    by_key: dict[str, list[Exchange]] = field(default_factory=dict)
    model: str | None = None
    """The real model spec's id the recording was made with."""
    served_model: str | None = None
    """The name the real server served the model under (its backend's ``model_id``)."""
    props: dict[str, Any] | None = None
    """What the real server's ``GET /props`` said (llama-server), served back at ``/props``."""


def load_recording(folder: Path) -> Recording:
    """The recording in ``folder`` (checked: each case file's shape and every exchange's fields)."""
    if not folder.is_dir():
        raise RecordingError(f"{folder}: no such recording folder (record one with scripts/real_model.py record)")
    rec = Recording(folder)
    total = 0
    manifest = folder / MANIFEST
    if manifest.is_file():
        meta = _read_json(manifest)
        if isinstance(meta, dict):
            rec.model = meta["model_id"] if isinstance(meta.get("model_id"), str) else None
            rec.served_model = meta["served_model"] if isinstance(meta.get("served_model"), str) else None
            rec.props = meta["server_props"] if isinstance(meta.get("server_props"), dict) and meta["server_props"] else None
    files = sorted(p for p in folder.glob(CASE_GLOB) if p.name != MANIFEST)
    if not files:
        raise RecordingError(f"{folder}: no recorded cases ({CASE_GLOB}) in it")
    for path in files:
        if path.is_symlink() or not path.is_file():
            raise RecordingError(f"{path}: not a regular file (a recording holds its own files, never a link)")
        total += path.stat().st_size
        if total > MAX_RECORDING_BYTES:
            raise RecordingError(f"{folder}: more than {MAX_RECORDING_BYTES} bytes of recorded cases")
        data = _read_json(path)
        if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION or not isinstance(data.get("exchanges"), list):
            raise RecordingError(f"{path}: not a recorded case of format {FORMAT_VERSION} (an object with 'exchanges')")
        for i, ex in enumerate(data["exchanges"]):
            rec.exchanges.append(_exchange(path, i, ex))
    for ex in rec.exchanges:
        rec.by_key.setdefault(ex.key, []).append(ex)
    return rec


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise RecordingError(f"{path}: unreadable ({type(exc).__name__}: {exc})"[:300]) from None


def _exchange(path: Path, index: int, ex: Any) -> Exchange:
    where = f"{path}: exchanges[{index}]"
    if not isinstance(ex, dict):
        raise RecordingError(f"{where} is not an object")
    conv, status, req_path = ex.get("conversation"), ex.get("status"), ex.get("path")
    if not isinstance(conv, list) or not all(isinstance(m, list) and len(m) == 3 for m in conv):
        raise RecordingError(f"{where}.conversation is not a list of [role, text, calls]")
    if not isinstance(status, int) or not (status == NO_ANSWER or 100 <= status <= 599):
        raise RecordingError(f"{where}.status is not an HTTP status (or {NO_ANSWER}: no answer before the phase ended)")
    if not isinstance(req_path, str) or not req_path.startswith("/"):
        raise RecordingError(f"{where}.path is not a request path")
    ctype = ex.get("content_type")
    return Exchange(case=path.stem, index=index, path=req_path, conversation=conv, status=status,
                    stream=bool(ex.get("stream")), response=ex.get("response"),
                    content_type=ctype if isinstance(ctype, str) else "")


def response_bytes(ex: Exchange) -> tuple[bytes, str]:
    """(body, content type) of a recorded response, as the server sent it: SSE events, NDJSON lines or JSON."""
    resp = ex.response
    if ex.stream and isinstance(resp, list):
        if all(isinstance(item, dict) and "data" in item for item in resp):
            out = []
            for item in resp:
                data = item["data"]
                text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
                head = f"event: {item['event']}\n" if item.get("event") else ""
                out.append(f"{head}data: {text}\n\n")
            return "".join(out).encode("utf-8"), "text/event-stream"
        lines = [item if isinstance(item, str) else json.dumps(item, ensure_ascii=False) for item in resp]
        return ("\n".join(lines) + "\n").encode("utf-8"), "application/x-ndjson"
    if isinstance(resp, str):
        return resp.encode("utf-8"), ex.content_type or "text/plain"
    if isinstance(resp, list) and len(resp) == 1 and not ex.stream:
        resp = resp[0]
    return json.dumps(resp, ensure_ascii=False).encode("utf-8"), "application/json"


# ------------------------------------------------------------------------------------------ the server

class ReplayServer:
    """One phase's replay server on 127.0.0.1."""

    def __init__(self, recording: Recording, *, model: str, log_path: Path | None = None) -> None:
        self.recording = recording
        self.model = model
        self.log_path = log_path
        self.pairs = scrub_pairs()
        self.served: dict[str, int] = {}
        self.mismatches: list[str] = []
        self.mismatch_count = 0
        self._log_lines = 0
        self._runner: Any = None
        self.base_url = ""

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/api/tags", self._tags)
        app.router.add_get("/props", self._props)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _models(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "replay"}]})

    async def _props(self, request: Any) -> Any:
        from aiohttp import web

        if self.recording.props is None:
            return web.json_response({"error": {"message": "the recording has no /props", "type": "not_found"}}, status=404)
        return web.json_response(self.recording.props)

    async def _tags(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response({"models": [{"name": self.model, "model": self.model}]})

    async def _answer(self, request: Any) -> Any:
        from aiohttp import web

        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        conv = conversation(body, self.pairs)
        key = conversation_key(request.path, conv)
        found = self.recording.by_key.get(key, [])
        n = self.served.get(key, 0)
        if n < len(found):
            self.served[key] = n + 1
            ex = found[n]
            self._log({"served": f"{ex.case}#{ex.index}", "path": request.path})
            if ex.status == NO_ANSWER:  # the real run's phase ended while this one was still being answered
                await asyncio.Event().wait()
            data, ctype = response_bytes(ex)
            return web.Response(status=ex.status, body=data, content_type=ctype.split(";")[0],
                                charset="utf-8" if ctype.startswith(("text/", "application/json")) else None)
        why = self._why(request.path, conv, again=n > 0)
        self.mismatch_count += 1
        if len(self.mismatches) < MAX_MISMATCHES:
            self.mismatches.append(why)
        self._log({MISMATCH: why, "path": request.path})
        return web.json_response({"error": {"message": why, "type": MISMATCH, "code": MISMATCH}}, status=409)

    def _why(self, path: str, conv: list[list[Any]], *, again: bool) -> str:
        if again:
            return (f"{MISMATCH}: this conversation was recorded {self.served.get(conversation_key(path, conv), 0)} "
                    f"time(s) and every recorded answer was served already")
        same = [ex for ex in self.recording.exchanges if ex.path.rstrip("/") == path.split("?", 1)[0].rstrip("/")]
        if not same:
            return f"{MISMATCH}: nothing was recorded for {path} (the recording has {sorted({e.path for e in self.recording.exchanges})})"

        def shared(ex: Exchange) -> tuple[int, int]:
            k = 0
            for a, b in zip(conv, ex.conversation):
                if a != b:
                    break
                k += 1
            return k, -abs(len(ex.conversation) - len(conv))

        near = max(same, key=shared)
        return (f"{MISMATCH}: no recorded answer for this conversation ({len(conv)} message(s)); nearest is "
                f"{near.case} exchange {near.index + 1}: {first_difference(conv, near.conversation)}")

    def _log(self, entry: dict[str, Any]) -> None:
        if self.log_path is None or self._log_lines >= MAX_LOG_LINES:
            return
        self._log_lines += 1
        if self._log_lines == MAX_LOG_LINES:
            entry = {"log_cut": f"the replay log keeps {MAX_LOG_LINES} lines; what came after is not listed"}
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"at": utc_now_iso(), **entry}, ensure_ascii=False) + "\n")


@dataclass
class ReplayEndpoint:
    """A running replay server for one phase; ``warnings`` names every request that did not match."""

    server: ReplayServer

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def warnings(self) -> list[str]:
        out = list(self.server.mismatches)
        more = self.server.mismatch_count - len(out)
        if more > 0:
            out.append(f"{MISMATCH}: and {more} more request(s) the recording does not hold")
        return out

    async def close(self) -> None:
        await self.server.stop()


_LOADED: dict[tuple[str, float], Recording] = {}


def recording_for(phase_spec: Any) -> Recording:
    """The recording a replay backend spec names (``recording:``), loaded once per folder and change."""
    where = getattr(phase_spec, "recording", None)
    if not where:
        raise RecordingError(f"backend {phase_spec.id!r} of kind replay names no recording: give recording: FOLDER")
    folder = Path(where)
    try:
        stamp = max((p.stat().st_mtime for p in folder.iterdir()), default=0.0)
    except OSError:
        stamp = -1.0
    cached = _LOADED.get((str(folder), stamp))
    if cached is None:
        cached = _LOADED[(str(folder), stamp)] = load_recording(folder)
    return cached


class ReplayBackend:
    kind = "replay"
    description = "a recorded real-model session served back by conversation (scripts/real_model.py records one)"
    remote = False

    async def open(self, phase: BackendPhase) -> ReplayEndpoint:
        recording = recording_for(phase.spec)
        log = phase.record_path.with_name(f"replay.{phase.phase}.jsonl") if phase.record_path is not None else None
        server = ReplayServer(recording, model=phase.spec.agent_model_id or phase.spec.model_id, log_path=log)
        await server.start()
        return ReplayEndpoint(server)

    async def probe(self, url: str, *, api_key: str | None = None, backend_id: str = "",
                    timeout_s: float = 5.0) -> BackendProbe:
        """The runner starts the replay itself: always there."""
        return BackendProbe(backend_id=backend_id, kind=self.kind, url=url or "(replay)", reachable=True,
                            models=1, latency_ms=0.0, checked_at=utc_now_iso())

    async def list_models(self, url: str = "", *, api_key: str | None = None, timeout_s: float = 5.0
                          ) -> list[ListedModel]:
        """The model the recording's server served (``url``: the recording's folder, as doctor gives it)."""
        try:
            rec = load_recording(Path(url)) if url else None
        except RecordingError as exc:
            raise LookupError(str(exc)) from None
        return [ListedModel(rec.served_model)] if rec is not None and rec.served_model else []

    async def probe_tool_call(self, url: str = "", *, model_id: str, api_key: str | None = None,
                              timeout_s: float = 120.0) -> ToolCallProbe:
        """doctor's tool-call probe answered as the real server answered it when the recording was made
        (``scripts/real_model.py record`` asks it too), its ``GET /props`` included; ``url`` is the recording's
        folder. A recording without that exchange says so (``outcome="error"``)."""
        from dataclasses import replace

        from .http import probe_served_by

        try:
            rec = load_recording(Path(url)) if url else None
        except RecordingError as exc:
            return ToolCallProbe(outcome="error", endpoint="(replay)", error=str(exc))
        if rec is None:
            return ToolCallProbe(outcome="error", endpoint="(replay)", error="no recording to replay")
        probe = await probe_served_by(ReplayServer(rec, model=model_id), model_id=model_id, timeout_s=timeout_s,
                                      endpoint=f"POST /v1/chat/completions of the recording {rec.folder.name}")
        if probe.outcome == "error" and MISMATCH in (probe.error or ""):
            probe = replace(probe, error=f"the recording holds no tool-call probe ({DOCTOR_FILE}): record it again "
                                         f"with scripts/real_model.py record")
        return probe
