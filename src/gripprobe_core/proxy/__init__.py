"""The recording proxy (SPEC §5, tier A): a reverse proxy that relays and records model traffic.

Public API::

    proxy = RecordingProxy(upstream_url, record_path)   # observed in the recorder process
    await proxy.start(); proxy.base_url; ...; await proxy.stop()
    read_records(record_path) -> list[dict]              # one dict per exchange
    DEFAULT_MAX_REQUEST_BODY                             # request body cap in bytes (64 MiB)
    close_recorder()                                     # stop this process's recorder (end of a run)

Modules: ``server`` (the proxy: lifecycle, where records go), ``client`` / ``upstream`` / ``relay`` /
``http1`` (the HTTP/1.1 relay: the agent's connections, the upstream pool, one exchange linking
them, request parsing), ``exchange`` (one exchange: timing, hand-over to the recorder),
``recorder`` (the recorder process: observes exchanges and writes their records) and
``recorder_client`` (the relay's side of it), ``observe`` (per-exchange parsing
into the record), ``sse`` / ``ndjson`` / ``protocols`` / ``text_tools`` / ``redact`` (wire parsing),
``events`` (records → tier A events). Names load lazily: importing this package (as the recorder
process does) pulls in neither aiohttp nor the parsers. See docs/proxy.md and docs/telemetry.md.
"""

from __future__ import annotations

from .._lazy import lazy_names

__all__ = ["DEFAULT_MAX_REQUEST_BODY", "UPSTREAM_ERRORS", "RecordingProxy", "close_recorder", "read_records"]

DEFAULT_MAX_REQUEST_BODY = 64 * 1024 * 1024
"""A request body over this many bytes is answered 413 and never forwarded (``--proxy-max-body``)."""

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    ".server": ("UPSTREAM_ERRORS", "RecordingProxy", "read_records"), ".recorder_client": ("close_recorder",)})
