"""The recording proxy (SPEC §5, tier A): a reverse proxy that relays and records model traffic.

Public API::

    proxy = RecordingProxy(upstream_url, record_path)   # observer: proxy.observe.ExchangeObserver
    await proxy.start(); proxy.base_url; ...; await proxy.stop()
    read_records(record_path) -> list[dict]              # one dict per exchange

Modules: ``server`` (the relay), ``observe`` (per-exchange parsing into the record), ``sse`` /
``ndjson`` / ``protocols`` / ``text_tools`` / ``redact`` (wire parsing), ``events`` (records → tier A
events). Only ``server`` is imported here; the parsers load when a proxy starts.
See docs/proxy.md and docs/telemetry.md.
"""

from .server import UPSTREAM_ERRORS, RecordingProxy, read_records

__all__ = ["UPSTREAM_ERRORS", "RecordingProxy", "read_records"]
