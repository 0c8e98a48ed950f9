"""The built-in model backends: the embedded oracle, any OpenAI-compatible server, Ollama, any server
speaking Anthropic's Messages API, and the replay of a recorded real-model session.

Each is a :class:`gripprobe_core.drivers.Backend` registered by the default plugin
:mod:`gripprobe_core.defaults.backends`; a plugin adds another kind with ``register_backends``.
"""

from __future__ import annotations

from .http import AnthropicBackend, OllamaBackend, OpenAICompatibleBackend, RemoteEndpoint, server_root
from .oracle import OracleBackend, OracleEndpoint
from .replay import ReplayBackend

__all__ = ["AnthropicBackend", "OllamaBackend", "OpenAICompatibleBackend", "OracleBackend", "OracleEndpoint", "RemoteEndpoint",
           "ReplayBackend",
           "model_digest", "server_root"]


def model_digest(listed, model_id: str) -> tuple[bool, str | None]:
    """``(listed, digest)`` of ``model_id`` in a model list (Ollama's ``name`` or ``name:latest``)."""
    want = {model_id, model_id if ":" in model_id else f"{model_id}:latest"}
    for m in listed:
        if m.name in want:
            return True, m.digest
    return False, None
