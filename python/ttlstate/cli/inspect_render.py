"""The text `ttlstate inspect` prints: a first line saying which time expired rows are counted
at, one line per store (operators and partitions in numeric order), one per operator, totals
and the problems found."""

from __future__ import annotations

from ttlstate.cli.at_time import AtTime, iso_utc
from ttlstate.cli.inspect_checkpoint import StoreReport, operator_reports
from ttlstate.config.parse import format_duration_ms


def _ranges(vs: list[int]) -> str:
    if not vs:
        return "-"
    out, start, prev = [], vs[0], vs[0]
    ends: list[int | None] = [*vs[1:], None]
    for v in ends:
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ",".join(out)


def _ttls(ttls: list[int | None]) -> str:
    return "/".join(format_duration_ms(t) for t in ttls) or "-"


def counted_at(reports: list[StoreReport], at: AtTime) -> str:
    """`the last batch's time, 2026-11-27T12:00:00.000Z (1795...)`: which time, and when it is
    (a range when the stores' last batches differ)."""
    times = sorted({r.counted_at_ms for r in reports if r.counted_at_ms is not None})
    what = at.describe()
    if not times:
        return what
    if len(times) == 1:
        when = f"{iso_utc(times[0])} ({times[0]} ms)"
    else:
        when = f"per store, from {iso_utc(times[0])} to {iso_utc(times[-1])}"
    unrecorded = at.instant_ms is None and any(r.last_batch_ms is None and r.rows is not None
                                               for r in reports)
    return f"{what}, {when}" + ("; stores without a recorded batch time: this machine's clock"
                                 if unrecorded else "")


def render(reports: list[StoreReport], at: AtTime | int | None = None) -> str:
    lines = []
    if at is not None:
        when = at if isinstance(at, AtTime) else AtTime(instant_ms=at)
        lines.append(f"expired rows counted at {counted_at(reports, when)}")
    name_w = max([len(r.operator_name or "-") for r in reports] + [4])
    head = (f"{'op':>3} {'name':<{name_w}} {'part':>4} {'store':<26} {'versions':<12} {'snapshots':<10} "
            f"{'rows':>8} {'expired':>8} {'ttl':>6} {'bytes':>10}")
    lines.append(head)
    for r in reports:
        expired = "-" if r.expired_rows is None else str(r.expired_rows)
        rows = "?" if r.rows is None else str(r.rows)
        lines.append(f"{r.operator:>3} {r.operator_name or '-':<{name_w}} {r.partition:>4} {r.store:<26} "
                     f"{_ranges(r.versions):<12} {_ranges(r.snapshots):<10} {rows:>8} {expired:>8} "
                     f"{format_duration_ms(r.ttl_ms):>6} {r.bytes:>10}")
    lines.append("per operator:")
    for o in operator_reports(reports):
        expired = "-" if o.expired_rows is None else str(o.expired_rows)
        lines.append(f"  operator {o.operator} ({o.name or 'name unknown'}): {o.stores} stores, "
                     f"{o.rows} rows, {expired} expired, TTL {_ttls(o.ttl_ms)}")
    total_rows = sum(r.rows or 0 for r in reports)
    total_bytes = sum(r.bytes for r in reports)
    lines.append(f"{len(reports)} stores, {total_rows} rows, {total_bytes} bytes")
    problems = [p for r in reports for p in r.problems]
    if problems:
        lines.append(f"{len(problems)} problem(s):")
        lines += [f"  {p}" for p in problems]
    return "\n".join(lines)
