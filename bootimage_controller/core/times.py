"""The API's two timestamp formats, written one way everywhere.

`metav1.Time` (conditions, annotations we write, Events' first/last timestamps) is RFC 3339 in UTC
with whole seconds; `metav1.MicroTime` (Lease renew times, `eventTime`) has exactly six fractional
digits. A naive datetime is taken to be UTC already.
"""

from __future__ import annotations

from datetime import UTC, datetime


def _utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def format_time(dt: datetime) -> str:
    """`metav1.Time`: `2026-01-02T03:04:05Z`."""
    return _utc(dt).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(dt: datetime) -> str:
    """`metav1.MicroTime`: `2026-01-02T03:04:05.000000Z`.

    Not `datetime.isoformat()`: it drops a zero fraction, which MicroTime refuses, and says `+00:00`.
    """
    return _utc(dt).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
