"""Default plugin: the built-in backend kinds ``oracle``, ``openai-compatible``, ``ollama``, ``anthropic`` and ``replay``."""

from __future__ import annotations

from typing import Callable

from .. import hookimpl
from ..backends import AnthropicBackend, OllamaBackend, OpenAICompatibleBackend, OracleBackend, ReplayBackend
from ..drivers import Backend


@hookimpl
def register_backends(register: Callable[[Backend], None]) -> None:
    for backend in (OracleBackend(), OpenAICompatibleBackend(), OllamaBackend(), AnthropicBackend(), ReplayBackend()):
        register(backend)
