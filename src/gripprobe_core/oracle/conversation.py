"""What the oracle reads and what it decides, independent of any wire protocol.

A protocol front end (Chat Completions, Responses, Ollama ``/api/chat`` and ``/api/generate``: see
``chat_api.py``, ``responses_api.py``, ``ollama_api.py``) turns an HTTP body into a :class:`ChatRequest`
whose ``messages`` are always in the Chat Completions shape, asks a profile for a :class:`Reply`, and
encodes the reply's :class:`Turn` in its own wire format. Nothing here knows about HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from ..models.specs import ReferenceAction, ReferenceEdit, ReferenceRead, ReferenceShell, ReferenceWrite

ActionKind = Literal["shell", "write", "edit", "read"]
ToolKind = Literal["function", "custom"]
ProtocolName = Literal["chat_completions", "responses", "ollama_chat", "ollama_generate", "anthropic_messages"]
PROTOCOLS: tuple[str, ...] = ("chat_completions", "responses", "ollama_chat", "ollama_generate", "anthropic_messages")


# ------------------------------------------------------------------------------------------ request

@dataclass(frozen=True)
class ToolInfo:
    """One tool offered by the request, whatever the wire shape was.

    ``kind`` is ``function`` (JSON ``parameters``) or ``custom`` (a freeform tool such as codex's
    ``apply_patch``: its input is raw text, optionally constrained by ``format``, e.g. a grammar).
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    kind: ToolKind = "function"
    format: dict[str, Any] = field(default_factory=dict)

    @property
    def properties(self) -> dict[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        req = self.parameters.get("required")
        return [r for r in req if isinstance(r, str)] if isinstance(req, list) else []


@dataclass(frozen=True)
class ChatRequest:
    """A normalized model request: who is asked (``model``), the conversation, the tools offered.

    ``messages`` use the Chat Completions shape whatever the protocol (Responses input items and
    Ollama messages are converted), so step counting works the same everywhere. ``tools`` holds the
    function tools, ``custom_tools`` the freeform ones. ``protocol`` names the wire it came on.
    """

    model: str
    messages: list[dict[str, Any]]
    tools: list[ToolInfo]
    stream: bool = False
    include_usage: bool = False
    raw: dict[str, Any] = field(default_factory=dict)
    protocol: ProtocolName = "chat_completions"
    custom_tools: list[ToolInfo] = field(default_factory=list)

    @property
    def has_tools(self) -> bool:
        """Does the request offer any tool (function or custom)?"""
        return bool(self.tools or self.custom_tools)

    @property
    def profile_candidates(self) -> list[str]:
        """Profile names ``model`` may mean, best first: :attr:`profile_name`, then the name without an
        Ollama tag (``perfect:latest`` → ``perfect``, ``ollama/slow-stream:7b`` → ``slow-stream``)."""
        out = [self.profile_name]
        untagged = self.model.rsplit("/", 1)[-1].split(":", 1)[0]
        if untagged and untagged not in out:
            out.append(untagged)
        return out

    @property
    def profile_name(self) -> str:
        """The part of ``model`` after the last ``/`` or ``:`` ("openai/perfect" → "perfect")."""
        name = self.model
        for sep in ("/", ":"):
            name = name.rsplit(sep, 1)[-1]
        return name

    def since_last_user(self) -> list[dict[str, Any]]:
        """Messages after the last ``user`` message (all of them when there is none)."""
        last = -1
        for i, msg in enumerate(self.messages):
            if msg.get("role") == "user":
                last = i
        return self.messages[last + 1:]

    def tool_call_turns(self) -> int:
        """Assistant messages carrying tool calls since the last user message."""
        return sum(1 for m in self.since_last_user()
                   if m.get("role") == "assistant" and isinstance(m.get("tool_calls"), list) and m["tool_calls"])

    def last_tool_output(self) -> str | None:
        """Text of the last ``tool`` message since the last user message, if any."""
        for msg in reversed(self.since_last_user()):
            if msg.get("role") == "tool":
                return message_text(msg)
        return None

    def tool(self, name: str) -> ToolInfo | None:
        return next((t for t in self.tools if t.name == name), None)

    def custom_tool(self, name: str) -> ToolInfo | None:
        return next((t for t in self.custom_tools if t.name == name), None)

    def assistant_texts(self) -> list[str]:
        """The text of every assistant message in the whole conversation, in order."""
        return [message_text(m) for m in self.messages if m.get("role") == "assistant"]


class RequestError(ValueError):
    """The body is not a request the oracle understands (→ HTTP 400)."""


def parse_chat_request(body: Any) -> ChatRequest:
    """Normalize a decoded Chat Completions body. Raises :class:`RequestError` on a bad shape."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RequestError("'messages' must be a list of objects")
    model = body.get("model")
    if not isinstance(model, str):
        model = ""
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
    return ChatRequest(model=model, messages=messages, tools=parse_tools(body.get("tools")),
                       stream=body.get("stream") is True, include_usage=include_usage, raw=body,
                       custom_tools=parse_custom_tools(body.get("tools")))


def parse_tools(tools: Any) -> list[ToolInfo]:
    """Function tools from either ``{"type":"function","function":{...}}`` or the flat Responses shape.

    Entries that are not function tools (web_search, custom tools ...) are ignored here.
    """
    out: list[ToolInfo] = []
    if not isinstance(tools, list):
        return out
    for entry in tools:
        if not isinstance(entry, dict) or entry.get("type", "function") != "function":
            continue
        fn = entry.get("function") if isinstance(entry.get("function"), dict) else entry
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        params = fn.get("parameters")
        desc = fn.get("description")
        out.append(ToolInfo(name=name, description=desc if isinstance(desc, str) else "",
                            parameters=params if isinstance(params, dict) else {}))
    return out


def parse_custom_tools(tools: Any) -> list[ToolInfo]:
    """Freeform tools: the flat Responses shape ``{"type":"custom","name","description","format"}`` or
    the Chat Completions shape ``{"type":"custom","custom":{...}}``. Everything else is ignored."""
    out: list[ToolInfo] = []
    if not isinstance(tools, list):
        return out
    for entry in tools:
        if not isinstance(entry, dict) or entry.get("type") != "custom":
            continue
        spec = entry.get("custom") if isinstance(entry.get("custom"), dict) else entry
        name, desc, fmt = spec.get("name"), spec.get("description"), spec.get("format")
        if not isinstance(name, str) or not name:
            continue
        out.append(ToolInfo(name=name, description=desc if isinstance(desc, str) else "", kind="custom",
                            format=fmt if isinstance(fmt, dict) else {}))
    return out


def message_text(msg: dict[str, Any]) -> str:
    """The text of a message whose content is a string or a list of text parts."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


# ------------------------------------------------------------------------------------------- turns

@dataclass(frozen=True)
class ToolCall:
    """A tool call the oracle decided to make. ``arguments`` is the raw string put on the wire, so a
    profile may send arguments that are not valid JSON. For a ``custom`` (freeform) tool it is the
    tool's raw input text (a patch for ``apply_patch``)."""

    name: str
    arguments: str
    kind: ToolKind = "function"

    @classmethod
    def of(cls, name: str, arguments: dict[str, Any]) -> "ToolCall":
        return cls(name, json.dumps(arguments, ensure_ascii=False))


@dataclass(frozen=True)
class TextCall:
    """A tool call written into the reply text instead of as a structured call (``text-tools``)."""

    call: ToolCall
    action_index: int | None = None


@dataclass(frozen=True)
class Turn:
    """One assistant message: text, a tool call, or both. ``action_index`` says which reference
    action it performs (None for a final answer, a side answer, or an explanation). ``text_calls``
    lists the tool calls the text spells out (recorded in the ground truth as nonstructured)."""

    text: str = ""
    tool_call: ToolCall | None = None
    action_index: int | None = None
    text_calls: tuple[TextCall, ...] = ()
    reasoning: str = ""
    """Reasoning said before the turn (``thinking`` block, ``reasoning_content``, a reasoning item, Ollama's
    ``thinking``); empty: none (every profile but ``deny-then-recover``)."""

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_call else "stop"


@dataclass(frozen=True)
class Reply:
    """What a profile wants sent: a turn, or an HTTP error, and how to pace it.

    ``http_status`` other than 200 sends ``error`` as the protocol's error body instead of the turn
    (OpenAI ``{"error": {"message": …}}``; Ollama native ``{"error": "…"}``).
    ``delay_s`` waits before the first byte; ``chunk_delay_s`` waits between stream chunks;
    ``stream_pieces`` (0: the protocol's default) is how many pieces text and arguments are cut into.
    ``stall`` accepts the request and never answers (until the client leaves or the server stops).
    """

    turn: Turn = field(default_factory=Turn)
    http_status: int = 200
    error: str = ""
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    stream_pieces: int = 0
    stall: bool = False


# ----------------------------------------------------------------------------------------- actions

def action_kind(action: ReferenceAction) -> ActionKind:
    if isinstance(action, ReferenceShell):
        return "shell"
    if isinstance(action, ReferenceWrite):
        return "write"
    if isinstance(action, ReferenceEdit):
        return "edit"
    if isinstance(action, ReferenceRead):
        return "read"
    raise TypeError(f"not a reference action: {action!r}")


def describe_action(action: ReferenceAction) -> str:
    """A short human phrase: ``run `ls```, ``write notes.txt`` ..."""
    if isinstance(action, ReferenceShell):
        return f"run `{action.shell}`"
    if isinstance(action, ReferenceWrite):
        return f"write {action.write.path}"
    if isinstance(action, ReferenceEdit):
        return f"edit {action.edit.path}"
    if isinstance(action, ReferenceRead):
        return f"read {action.read.path}"
    return repr(action)


def describe_plan(actions: Sequence[ReferenceAction]) -> str:
    return "; ".join(f"{i + 1}. {describe_action(a)}" for i, a in enumerate(actions)) or "nothing"
