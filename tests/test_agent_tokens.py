"""When the wire carries no token counts (aider asks for none) the usage takes the counts the agent printed,
and says so; the wire's own counts always win (issue 22)."""

from __future__ import annotations

from gripprobe_core.models.results import Usage
from gripprobe_core.models.specs import Pricing
from gripprobe_core.reports.scores import usage_text
from gripprobe_core.telemetry.usage import (ModelCall, calls_from_records, combine, summarize,
                                            with_agent_tokens)

P = "x_gripprobe_"


def _record(usage=None) -> dict:
    return {P + "protocol": "chat_completions", P + "usage": usage, P + "ttft_ms": 200.0, P + "ttfb_ms": 1.0,
            P + "duration_ms": 1200.0}


def test_the_agents_counts_fill_a_wire_without_any():
    wire = summarize(calls_from_records([_record(), _record()]), "A")
    assert wire.prompt_tokens is None and wire.model_calls == 2
    told = [ModelCall(prompt=633, completion=12), ModelCall(prompt=700, completion=20)]
    got = with_agent_tokens(wire, told, Pricing(input_per_million=1.0, output_per_million=2.0))
    assert (got.source, got.tokens_from, got.model_calls) == ("A", "agent", 2)
    assert (got.prompt_tokens, got.completion_tokens, got.total_tokens) == (1333, 32, 1365)
    assert got.ttft_ms == wire.ttft_ms and got.generation_s == wire.generation_s == 2.0
    assert got.output_tokens_per_s == 16.0 and got.cost is not None
    assert "as the agent reported them" in usage_text(got.model_dump())
    assert combine([got, Usage(source="A", model_calls=1)]).tokens_from == "agent"


def test_the_wires_counts_win_and_nothing_told_changes_nothing():
    wire = summarize(calls_from_records([_record({"prompt_tokens": 10, "completion_tokens": 2})]), "A")
    assert with_agent_tokens(wire, [ModelCall(prompt=999, completion=9)]) == wire
    empty = summarize(calls_from_records([_record()]), "A")
    assert with_agent_tokens(empty, [ModelCall()]) == empty and empty.tokens_from is None
