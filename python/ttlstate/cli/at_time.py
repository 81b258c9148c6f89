"""`ttlstate inspect --at`: the time at which to count expired rows, as a user writes it (now, an
ISO time, a duration ago or ahead, epoch milliseconds), and how the report prints a time."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ttlstate.config.parse import ConfError, parse_duration_ms

AT_HELP = ("when to count expired rows: now (default), an ISO 8601 time (2026-11-23T18:40:00Z; "
           "without an offset, this machine's local time), a duration ago (10m, -10m, '10m ago') "
           "or ahead (+1h, 'in 1h'), or epoch milliseconds")


def parse_at(text: str, now_ms: int) -> int:
    """`--at`: epoch ms of `now`, an ISO time, a duration ago (`10m`, `-10m`, `10m ago`) or ahead
    (`+1h`, `in 1h`), or epoch milliseconds (a bare number, as Spark's batchTimestampMs)."""
    t = text.strip()
    low = t.lower()
    if low == "now":
        return now_ms
    if re.fullmatch(r"\d+", t):
        return int(t)
    sign, body = -1, low
    if low.startswith("+") or low.startswith("in "):
        sign, body = 1, low[1:] if low.startswith("+") else low[3:]
    elif low.startswith("-"):
        body = low[1:]
    elif low.endswith(" ago"):
        body = low[:-4]
    if re.fullmatch(r"\s*\d+\s*[a-z]+\s*", body):
        try:
            return now_ms + sign * parse_duration_ms("--at", body)
        except ConfError:
            pass
    try:
        when = datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t)
    except ValueError:
        raise ValueError(f"--at {text!r}: expected {AT_HELP}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time
    return int(when.timestamp() * 1000)


def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")
