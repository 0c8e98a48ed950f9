"""The wire vocabulary the proxy and the telemetry share, with no model behind it (the recorder process
imports this, and never pydantic)."""

from __future__ import annotations

MODEL_PROTOCOLS = frozenset({"chat_completions", "responses", "ollama_chat", "ollama_generate", "anthropic_messages"})
"""The wire protocols whose exchanges are model calls (a proxy record's ``x_gripprobe_protocol``, a
``model_response`` event's ``payload.protocol``): the proxy that records them and the telemetry that
counts them share this vocabulary."""
