"""`ttlstate inspect --at`: the one time at which expired rows are counted and ages measured.

By default that is the last batch's time: the time the checkpoint recorded for each store's
newest version, on the clock TTL counts in (the batch timestamp by default, see the clocks
page of the docs), so the answer does not depend on when or where the command runs. A duration
moves it before or after that time; `now` (this machine's clock), an ISO 8601 time or epoch
milliseconds name an instant instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ttlstate.config.parse import ConfError, format_duration_ms, parse_duration_ms

AT_HELP = ("when to count expired rows and measure ages: 'last' (the last batch's time: the time "
           "the checkpoint recorded for each store's newest version, on the clock TTL counts); a "
           "duration before it ('10m', '-10m', '10m ago', '10 minutes': 10 minutes before the last "
           "batch) or after it ('+1h', 'in 1h': an hour after the last batch, what would have "
           "expired by then); 'now' (this machine's clock); an ISO 8601 time "
           "(2026-11-23T18:40:00Z; without an offset, this machine's local time); or epoch "
           "milliseconds")


@dataclass(frozen=True)
class AtTime:
    """`--at`, parsed: an offset from each store's last batch time, or an instant."""

    offset_ms: int = 0  # from the last batch's time (when `instant_ms` is None)
    instant_ms: int | None = None
    now: bool = False  # the instant is this machine's clock when the command ran

    def resolve(self, last_batch_ms: int | None, now_ms: int) -> int:
        """The time for a store whose newest version's recorded time is `last_batch_ms` (None:
        the checkpoint recorded none, so this machine's clock is the last resort)."""
        if self.instant_ms is not None:
            return self.instant_ms
        return (now_ms if last_batch_ms is None else last_batch_ms) + self.offset_ms

    def describe(self) -> str:
        """What the time is, for the table's first line."""
        if self.now:
            return "now (this machine's clock)"
        if self.instant_ms is not None:
            return "the time given with --at"
        if self.offset_ms == 0:
            return "the last batch's time"
        where = "after" if self.offset_ms > 0 else "before"
        return f"{format_duration_ms(abs(self.offset_ms))} {where} the last batch's time"


def parse_at(text: str, now_ms: int) -> AtTime:
    """`--at` (see AT_HELP); ValueError with what is allowed."""
    t = text.strip()
    low = t.lower()
    if low in ("last", "last batch", ""):
        return AtTime()
    if low == "now":
        return AtTime(instant_ms=now_ms, now=True)
    if t.isdigit():
        return AtTime(instant_ms=int(t))
    sign, body = -1, low
    if low.startswith("+") or low.startswith("in "):
        sign, body = 1, low[1:] if low.startswith("+") else low[3:]
    elif low.startswith("-"):
        body = low[1:]
    elif low.endswith(" ago"):
        body = low[:-4]
    try:
        return AtTime(offset_ms=sign * parse_duration_ms("--at", body))
    except ConfError:
        pass
    try:
        when = datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t)
    except ValueError:
        raise ValueError(f"--at {text!r}: expected {AT_HELP}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time
    return AtTime(instant_ms=int(when.timestamp() * 1000))


def iso_utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")
