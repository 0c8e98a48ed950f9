"""OpenAI Responses API (``POST /v1/responses``): request parsing, JSON replies and the SSE event stream.

Input items are converted to Chat Completions messages so profiles and dialects see one shape:

- ``{"type": "message", "role", "content"}`` (or the short form without ``type``) → ``{"role", "content"}``
  (``developer`` stays ``developer``; content parts keep their ``text``);
- ``function_call`` / ``custom_tool_call`` / any other ``*_call`` item with a ``call_id`` → an assistant
  message carrying ``tool_calls`` (consecutive calls, and an assistant message right before them,
  form one assistant message, as one response would);
- ``function_call_output`` / ``custom_tool_call_output`` / any ``*_call_output`` → ``{"role": "tool",
  "tool_call_id", "content"}``;
- other items (``reasoning`` …) are skipped. ``instructions`` becomes a leading system message.

Replies: a text turn is a ``message`` output item, a function call a ``function_call`` item
``{call_id, name, arguments}``, a freeform call a ``custom_tool_call`` item ``{call_id, name, input}``.
The stream is the real event sequence: ``response.created``, ``response.in_progress``, per item
``response.output_item.added`` → deltas (``response.output_text.delta`` inside a content part,
``response.function_call_arguments.delta``, ``response.custom_tool_call_input.delta``) → the matching
``.done`` event → ``response.output_item.done``, then ``response.completed`` with ``usage``. Every
event has ``type`` and a ``sequence_number``; frames are ``event: <type>`` + ``data: <json>``.
"""

from __future__ import annotations

import json
from typing import Any

from .conversation import ChatRequest, RequestError, Turn, parse_custom_tools, parse_tools
from .wire import JSONDict, ReplyMeta, json_bytes, openai_error, split_pieces


class ResponsesWire:
    """The :class:`~.wire.WireProtocol` adapter for the Responses API."""

    name = "responses"
    stream_content_type = "text/event-stream"
    carries_tool_calls = True

    def parse(self, body: Any) -> ChatRequest:
        return parse_responses_request(body)

    def error_body(self, status: int, message: str) -> JSONDict:
        return openai_error(status, message)

    def reply_json(self, turn: Turn, meta: ReplyMeta) -> JSONDict:
        return response_object(meta, output_items(turn, meta), status="completed")

    def reply_frames(self, turn: Turn, meta: ReplyMeta) -> list[bytes]:
        return [f"event: {e['type']}\ndata: ".encode() + json_bytes(e) + b"\n\n" for e in response_events(turn, meta)]


# ------------------------------------------------------------------------------------------ parsing

def parse_responses_request(body: Any) -> ChatRequest:
    """Normalize a decoded Responses body. Raises :class:`~.plan.RequestError` on a bad shape."""
    if not isinstance(body, dict):
        raise RequestError("request body must be a JSON object")
    messages: list[JSONDict] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        messages += input_items_to_messages(items)
    else:
        raise RequestError("'input' must be a string or a list of input items")
    model = body.get("model")
    return ChatRequest(model=model if isinstance(model, str) else "", messages=messages,
                       tools=parse_tools(body.get("tools")), stream=body.get("stream") is True,
                       include_usage=True, raw=body, protocol="responses",
                       custom_tools=parse_custom_tools(body.get("tools")))


def input_items_to_messages(items: list[Any]) -> list[JSONDict]:
    """Responses input items as Chat Completions messages (see the module docstring)."""
    out: list[JSONDict] = []
    for item in items:
        if not isinstance(item, dict):
            raise RequestError("every input item must be an object")
        kind = item.get("type")
        role = item.get("role")
        if kind in (None, "message") and isinstance(role, str):
            out.append({"role": role, "content": _content(item.get("content"))})
        elif isinstance(kind, str) and kind.endswith("_call_output"):
            out.append({"role": "tool", "tool_call_id": _str(item.get("call_id")),
                        "content": output_text(item.get("output"))})
        elif isinstance(kind, str) and kind.endswith("_call") and ("call_id" in item or "name" in item):
            call = _tool_call(item, kind)
            last = out[-1] if out else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
    return out


def _tool_call(item: JSONDict, kind: str) -> JSONDict:
    call_id = _str(item.get("call_id")) or _str(item.get("id"))
    name = _str(item.get("name")) or kind
    if kind == "custom_tool_call":
        return {"id": call_id, "type": "custom", "custom": {"name": name, "input": _str(item.get("input"))}}
    args = item.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args if args is not None else item.get("action") or {}, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def _content(content: Any) -> Any:
    """Message content as given when it is text or a list of parts; else empty text."""
    return content if isinstance(content, (str, list)) else ""


def output_text(output: Any) -> str:
    """A tool output as text: a string, the text of content parts, or other JSON dumped."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(p.get("text", "") for p in output if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if output is None else json.dumps(output, ensure_ascii=False)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ----------------------------------------------------------------------------------------- encoding

def responses_usage(meta: ReplyMeta) -> JSONDict:
    u = meta.usage
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"input_tokens": u["prompt_tokens"], "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": u["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u["total_tokens"]}


def response_object(meta: ReplyMeta, output: list[JSONDict], *, status: str) -> JSONDict:
    """The ``response`` object; ``usage`` only once completed."""
    raw = meta.request.raw
    return {"id": f"resp_oracle_{meta.n}", "object": "response", "created_at": meta.created, "status": status,
            "error": None, "incomplete_details": None, "instructions": raw.get("instructions"),
            "model": meta.request.model, "output": output,
            "parallel_tool_calls": raw.get("parallel_tool_calls", True), "tool_choice": raw.get("tool_choice", "auto"),
            "usage": responses_usage(meta) if status == "completed" else None}


def _message_item(turn: Turn, meta: ReplyMeta, status: str = "completed") -> JSONDict:
    content = [{"type": "output_text", "text": turn.text, "annotations": []}] if status == "completed" else []
    return {"id": f"msg_oracle_{meta.n}", "type": "message", "status": status, "role": "assistant",
            "content": content}


def _call_item(turn: Turn, meta: ReplyMeta, status: str = "completed") -> JSONDict:
    call = turn.tool_call
    assert call is not None
    done = status == "completed"
    if call.kind == "custom":
        return {"id": f"ctc_oracle_{meta.n}", "type": "custom_tool_call", "status": status,
                "call_id": meta.call_id, "name": call.name, "input": call.arguments if done else ""}
    return {"id": f"fc_oracle_{meta.n}", "type": "function_call", "status": status,
            "call_id": meta.call_id, "name": call.name, "arguments": call.arguments if done else ""}


def _reasoning_item(turn: Turn, meta: ReplyMeta, status: str = "completed") -> JSONDict:
    summary = [{"type": "summary_text", "text": turn.reasoning}] if status == "completed" else []
    return {"id": f"rs_oracle_{meta.n}", "type": "reasoning", "summary": summary}


def output_items(turn: Turn, meta: ReplyMeta) -> list[JSONDict]:
    """The completed output items: the reasoning (when there is some), the message (when there is text, or
    nothing else), then the call."""
    items: list[JSONDict] = []
    if turn.reasoning:
        items.append(_reasoning_item(turn, meta))
    if turn.text or turn.tool_call is None:
        items.append(_message_item(turn, meta))
    if turn.tool_call is not None:
        items.append(_call_item(turn, meta))
    return items


def response_events(turn: Turn, meta: ReplyMeta) -> list[JSONDict]:
    """The SSE events of a streamed reply, in order, each with ``type`` and ``sequence_number``."""
    events: list[JSONDict] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    emit("response.created", response=response_object(meta, [], status="in_progress"))
    emit("response.in_progress", response=response_object(meta, [], status="in_progress"))
    pieces = meta.pieces
    for index, item in enumerate(output_items(turn, meta)):
        item_id = item["id"]
        if item["type"] == "reasoning":
            emit("response.output_item.added", output_index=index, item=_reasoning_item(turn, meta, "in_progress"))
            part = {"type": "summary_text", "text": ""}
            emit("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=0,
                 part=part)
            for piece in split_pieces(turn.reasoning, pieces or 3):
                emit("response.reasoning_summary_text.delta", item_id=item_id, output_index=index, summary_index=0,
                     delta=piece)
            emit("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=0,
                 text=turn.reasoning)
            emit("response.reasoning_summary_part.done", item_id=item_id, output_index=index, summary_index=0,
                 part={**part, "text": turn.reasoning})
        elif item["type"] == "message":
            emit("response.output_item.added", output_index=index, item=_message_item(turn, meta, "in_progress"))
            part = {"type": "output_text", "text": "", "annotations": []}
            emit("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=part)
            for piece in split_pieces(turn.text, pieces or 3):
                emit("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
                     delta=piece, logprobs=[])
            emit("response.output_text.done", item_id=item_id, output_index=index, content_index=0,
                 text=turn.text, logprobs=[])
            emit("response.content_part.done", item_id=item_id, output_index=index, content_index=0,
                 part={**part, "text": turn.text})
        else:
            emit("response.output_item.added", output_index=index, item=_call_item(turn, meta, "in_progress"))
            raw = turn.tool_call.arguments if turn.tool_call else ""
            if item["type"] == "custom_tool_call":
                for piece in split_pieces(raw, pieces or 4):
                    emit("response.custom_tool_call_input.delta", item_id=item_id, output_index=index, delta=piece)
                emit("response.custom_tool_call_input.done", item_id=item_id, output_index=index, input=raw)
            else:
                for piece in split_pieces(raw, pieces or 4):
                    emit("response.function_call_arguments.delta", item_id=item_id, output_index=index,
                         delta=piece)
                emit("response.function_call_arguments.done", item_id=item_id, output_index=index,
                     name=item["name"], arguments=raw)
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=response_object(meta, output_items(turn, meta), status="completed"))
    return events
