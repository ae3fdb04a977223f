"""The API's two timestamp formats, written one way everywhere.

`metav1.Time` (conditions, annotations we write, Events' first/last timestamps) is RFC 3339 in UTC
with whole seconds. (`metav1.MicroTime`, six fractional digits, is the Lease's alone:
kube/leader.py `format_micro_time`.) A naive datetime is taken to be UTC already.
"""

from __future__ import annotations

from datetime import UTC, datetime


def _utc(dt: datetime) -> datetime:
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def format_time(dt: datetime) -> str:
    """`metav1.Time`: `2026-01-02T03:04:05Z`."""
    return _utc(dt).strftime("%Y-%m-%dT%H:%M:%SZ")
