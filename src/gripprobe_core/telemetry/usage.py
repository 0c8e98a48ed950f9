"""Model calls, tokens, latency and cost of a phase, from the wire.

With the recording proxy (tier A) every model call is a record: its usage (prompt, completion, cached
tokens as the backend reported them), the time to its first output (``ttft_ms``: the first object that
carries text, reasoning or a tool call — a server's keep-alive comments while it reads a long prompt and
role-only deltas are not output; records from before it existed give the first response byte, ``ttfb_ms``)
and its duration. Without the proxy, the agent's own ``model_response`` events
(tier B) may carry usage; then there is no timing. Cost comes from the model spec's optional ``pricing``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Iterable

from ..models.bounds import CALL_TOKENS_MAX, COST_MAX, COUNT_MAX, SECONDS_MAX, saturate
from ..models.events import Event
from ..models.results import Usage
from ..models.specs import Pricing
from ..models.events import MODEL_PROTOCOLS

__all__ = ["ModelCall", "calls_from_events", "calls_from_records", "combine", "phases_usage", "summarize",
           "with_agent_tokens"]

P = "x_gripprobe_"


@dataclass(frozen=True)
class ModelCall:
    prompt: int | None = None
    completion: int | None = None
    cached: int | None = None
    total: int | None = None
    ttfb_ms: float | None = None
    """Time to the first output (the record's ``ttft_ms``; ``ttfb_ms`` in records that predate it)."""
    duration_ms: float | None = None


def _int(v: Any) -> int | None:
    """A token count one call can have (0 … ``CALL_TOKENS_MAX``); anything else, from a backend or an agent,
    is unknown."""
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= CALL_TOKENS_MAX else None


def _num(v: Any) -> float | None:
    """Milliseconds one call can take (finite, 0 … ``SECONDS_MAX`` s); anything else is unknown."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= SECONDS_MAX * 1000:
        return float(v)
    return None


def _first(u: dict, *keys: str) -> int | None:
    for k in keys:
        if (v := _int(u.get(k))) is not None:
            return v
    return None


def _call(usage: Any, ttfb: Any = None, duration: Any = None) -> ModelCall:
    """One call's tokens from any shape a backend or an agent reports: Chat Completions (``prompt_tokens``,
    cached ones among them), Responses (``input_tokens`` with ``cached_input_tokens`` among them),
    Anthropic-style and gptme's log (``input_tokens`` *apart from* ``cache_read[_input]_tokens`` and
    ``cache_creation[_input]_tokens``: the prompt is their sum), opencode's ``{input, output, total,
    cache: {read}}``, Ollama's ``prompt_eval_count``/``eval_count``. The prompt always counts every prompt
    token, cached or not."""
    u = usage if isinstance(usage, dict) else {}
    cache = u.get("cache") if isinstance(u.get("cache"), dict) else {}
    prompt, completion = call_tokens(u)
    cached = _first(u, "cached_tokens", "cached_input_tokens", "cache_read_input_tokens", "cache_read_tokens")
    if cached is None:
        cached = _int(cache.get("read"))
    return ModelCall(prompt, completion, cached, _first(u, "total_tokens", "total"), _num(ttfb), _num(duration))


def call_tokens(usage: Any) -> tuple[int | None, int | None]:
    """(prompt tokens, completion tokens) of one call's usage in any shape :func:`_call` reads, the prompt
    counting cached tokens too (so the proxy's and an agent's record of one reply agree)."""
    u = usage if isinstance(usage, dict) else {}
    prompt = _first(u, "prompt_tokens", "prompt_eval_count")
    if prompt is None:
        prompt = _first(u, "input_tokens", "input")
        apart = [_first(u, "cache_read_input_tokens", "cache_read_tokens"),
                 _first(u, "cache_creation_input_tokens", "cache_creation_tokens")]
        if prompt is not None and "cached_input_tokens" not in u:
            prompt += sum(v for v in apart if v is not None)
    return prompt, _first(u, "completion_tokens", "output_tokens", "eval_count", "output")


def calls_from_records(records: Iterable[Any]) -> list[ModelCall]:
    """One call per proxy record of a model protocol (listings and other requests are not model calls)."""
    return [_call(r.get(P + "usage"), r.get(P + "ttft_ms") if P + "ttft_ms" in r else r.get(P + "ttfb_ms"),
                  r.get(P + "duration_ms")) for r in records
            if isinstance(r, dict) and r.get(P + "protocol") in MODEL_PROTOCOLS]


def calls_from_events(events: Iterable[Event], tiers: tuple[str, ...] = ("B",)) -> list[ModelCall]:
    """One call per ``model_response`` an agent reported (tier B; ``tiers``: also C, its printed output), with
    the usage it reported, if any."""
    return [_call(e.payload.get("usage") if isinstance(e.payload, dict) else None, duration=e.latency_ms)
            for e in events if e.event_type == "model_response" and e.source_tier in tiers]


def with_agent_tokens(usage: Usage, told: list[ModelCall], pricing: Pricing | None = None) -> Usage:
    """``usage`` (from the wire) whose calls carried no token counts, given the ones the agent reported for
    the same calls (``told``: aider prints ``Tokens: N sent, M received.`` and asks the wire for none);
    ``tokens_from`` then says so. Unchanged when the wire had counts or the agent told none."""
    if usage.prompt_tokens is not None or usage.completion_tokens is not None:
        return usage
    agent = summarize(told, "B", pricing)
    if agent.prompt_tokens is None and agent.completion_tokens is None:
        return usage
    rate = _rate(agent.completion_tokens, usage.generation_s) if agent.completion_tokens and usage.generation_s else None
    return usage.model_copy(update={
        "prompt_tokens": agent.prompt_tokens, "completion_tokens": agent.completion_tokens,
        "cached_tokens": agent.cached_tokens, "total_tokens": agent.total_tokens, "output_tokens_per_s": rate,
        "cost": agent.cost, "currency": agent.currency, "tokens_from": "agent"})


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return saturate(sum(known)) if known else None


def _seconds(ms: float) -> float:
    return round(min(ms / 1000, SECONDS_MAX), 4)


def _rate(tokens: int, seconds: float) -> float:
    return round(min(tokens / seconds, COUNT_MAX), 1)


def summarize(calls: list[ModelCall], source: str, pricing: Pricing | None = None) -> Usage:
    """The usage of one phase from its model calls."""
    if not calls:
        return Usage(source=source if source == "A" else "none")  # type: ignore[arg-type]
    prompt, completion = _sum([c.prompt for c in calls]), _sum([c.completion for c in calls])
    cached = _sum([c.cached for c in calls])
    total = _sum([c.total if c.total is not None else
                  (c.prompt or 0) + (c.completion or 0) if c.prompt is not None or c.completion is not None else None
                  for c in calls])  # a call without a total counts its prompt + completion
    ttfbs = [c.ttfb_ms for c in calls if c.ttfb_ms is not None]
    durations = [c.duration_ms for c in calls if c.duration_ms is not None]
    gen = [c.duration_ms - c.ttfb_ms for c in calls if c.duration_ms is not None and c.ttfb_ms is not None]
    generation_s = sum(max(0.0, g) for g in gen) / 1000 if gen else None
    out_rate = None
    if generation_s and completion:
        out_rate = _rate(completion, generation_s)
    cost = None
    if pricing is not None and (prompt is not None or completion is not None):
        cost = round(min(pricing.cost(prompt or 0, completion or 0, cached or 0), COST_MAX), 8)
    return Usage(source=source, model_calls=len(calls), prompt_tokens=prompt,  # type: ignore[arg-type]
                 completion_tokens=completion, cached_tokens=cached, total_tokens=total,
                 ttft_ms=round(statistics.median(ttfbs), 3) if ttfbs else None,
                 model_time_s=_seconds(sum(durations)) if durations else None,
                 generation_s=_seconds(generation_s * 1000) if generation_s is not None else None,
                 output_tokens_per_s=out_rate, cost=cost, currency=pricing.currency if cost is not None else None)


def phases_usage(phases: Iterable[Any]) -> Usage | None:
    """A case's usage: its phases' (records with ``phase`` and ``usage``) added up, saying which it counts."""
    phases = [p for p in phases if p.usage is not None]
    total = combine(p.usage for p in phases)
    if total is not None:
        total.phases = [p.phase for p in phases]
    return total


def combine(usages: Iterable[Usage | None]) -> Usage | None:
    """Phases (or cases) added up: calls, tokens, times and cost summed; time to first token averaged over
    the calls; the output rate recomputed from the sums. None when none is known."""
    parts = [u for u in usages if u is not None]
    if not parts:
        return None
    calls = saturate(sum(u.model_calls for u in parts))
    ttfts = [(u.ttft_ms, u.model_calls) for u in parts if u.ttft_ms is not None and u.model_calls]
    completion = _sum([u.completion_tokens for u in parts])
    generation = sum(u.generation_s or 0.0 for u in parts) or None
    model_time = sum(u.model_time_s or 0.0 for u in parts) or None
    costs = [u.cost for u in parts if u.cost is not None]
    sources = {u.source for u in parts if u.source != "none"}
    return Usage(
        source=min(sources) if sources else "none",  # type: ignore[arg-type]
        model_calls=calls, prompt_tokens=_sum([u.prompt_tokens for u in parts]), completion_tokens=completion,
        cached_tokens=_sum([u.cached_tokens for u in parts]), total_tokens=_sum([u.total_tokens for u in parts]),
        ttft_ms=round(sum(t * n for t, n in ttfts) / sum(n for _, n in ttfts), 3) if ttfts else None,
        model_time_s=_seconds(model_time * 1000) if model_time else None,
        generation_s=_seconds(generation * 1000) if generation else None,
        output_tokens_per_s=_rate(completion, generation) if completion and generation else None,
        cost=round(min(sum(costs), COST_MAX), 8) if costs else None, currency=next((u.currency for u in parts if u.currency), None),
        tokens_from="agent" if any(u.tokens_from == "agent" for u in parts) else None)
