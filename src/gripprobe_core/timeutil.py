"""Time helpers: one place for the timestamp format every artifact uses."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def utc_now_iso() -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2026-11-22T10:32:00.123Z``."""
    return iso(utc_now())


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def run_id_stamp(dt: datetime | None = None) -> str:
    """RUN_ID stem: UTC ``YYYYMMDDTHHMMSSZ``."""
    return (dt or utc_now()).astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
