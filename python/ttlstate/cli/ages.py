"""`ttlstate inspect --ages`: a TTL advisor. Per operator, how long before the inspected time
(`--at`, by default the last batch's time) its entries were last accessed, and what a given TTL
would have removed by then, from a stopped query's checkpoint.

An entry's last access is the 8-byte timestamp its value starts with (TtlValue), written on the
clock the store used; the last batch's time is on the same clock, so ages mean the same under
every time source and do not depend on when the command runs. The table of `inspect` counts
expired rows at the same time, so the two agree.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from ttlstate.cli.age_buckets import bucket_counts, bucket_edges, bucket_labels
from ttlstate.config.parse import format_duration_ms
from ttlstate.ttl.expiry import is_expired


@dataclass
class StoreAges:
    """The last-access timestamps of one store's entries and the time they are aged against."""

    operator: str
    operator_name: str | None
    reference_ms: int | None  # the inspected time for this store (None: unknown)
    timestamps: array  # of int64, one per entry

    def ages(self) -> list[int]:
        if self.reference_ms is None:
            return []
        ref = self.reference_ms
        return [ref - ts for ts in self.timestamps]


@dataclass
class OperatorAges:
    operator: str
    name: str | None
    entries: int
    unaged: int  # entries of stores with no recorded batch time
    percentiles_ms: dict[str, int]  # p50, p90, p99, max
    histogram: list[tuple[str, int]]  # (bucket label, entries)
    removed_by_ttl: int | None  # entries a `--ttl` would have removed by the inspected time
    ttl_ms: int | None
    ages_ms: list[int]
    edges_ms: list[int]  # upper edges of the histogram's buckets but the last


def _percentile(sorted_ages: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of a sorted, non-empty sequence."""
    rank = max(1, -(-len(sorted_ages) * q // 100))  # ceil(n * q / 100), at least 1
    return sorted_ages[int(rank) - 1]


def operator_key(op: str) -> tuple[int, str]:
    """Operators and partitions in numeric order (0, 1, 2, 10), names after numbers."""
    return (int(op), "") if op.isdigit() else (1 << 62, op)


def operator_ages(stores: list[StoreAges], ttl_ms: int | None) -> list[OperatorAges]:
    """Ages pooled per operator, their percentiles, histogram and what `ttl_ms` would remove
    (Flink's rule: an entry is expired at `ts + ttl <= now`)."""
    by_op: dict[str, list[StoreAges]] = {}
    for s in stores:
        by_op.setdefault(s.operator, []).append(s)
    out = []
    for op in sorted(by_op, key=operator_key):
        group = by_op[op]
        ages = sorted(a for s in group for a in s.ages())
        unaged = sum(len(s.timestamps) for s in group if s.reference_ms is None)
        edges = bucket_edges(ages, ttl_ms)
        pct = ({} if not ages else
               {"p50": _percentile(ages, 50), "p90": _percentile(ages, 90),
                "p99": _percentile(ages, 99), "max": ages[-1]})
        removed = None
        if ttl_ms is not None:
            removed = sum(1 for s in group if s.reference_ms is not None
                          for ts in s.timestamps if is_expired(ts, ttl_ms, s.reference_ms))
        histogram = list(zip(bucket_labels(edges), bucket_counts(ages, edges), strict=True))
        out.append(OperatorAges(op, group[0].operator_name, len(ages) + unaged, unaged, pct,
                                histogram, removed, ttl_ms, ages, edges))
    return out


def _age(ms: int) -> str:
    """An age for people: 0s, 45s, 12m, 3h, 2d (rounded down to the largest unit)."""
    if ms < 0:
        return "-" + _age(-ms)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def render_ages(ops: list[OperatorAges], at: str = "the last batch's time") -> str:
    """The advisor's text: per operator, percentiles, the histogram and what --ttl removes;
    `at` says which time the ages are measured from (as the table's first line does)."""
    lines = [f"last-access ages at {at}:"]
    for o in ops:
        lines.append(f"operator {o.operator} ({o.name or 'name unknown'}): {o.entries} entries")
        if o.unaged:
            lines.append(f"  {o.unaged} entries of stores without a recorded batch time are not aged")
        if o.percentiles_ms:
            shown = ", ".join(f"{k} {_age(v)}" for k, v in o.percentiles_ms.items())
            lines.append(f"  last access age: {shown}")
            width = max(len(label) for label, _ in o.histogram)
            total = max(1, sum(n for _, n in o.histogram))
            for label, n in o.histogram:
                bar = "#" * round(40 * n / total)
                lines.append(f"  {label:>{width}} {n:>9} {bar}")
        if o.removed_by_ttl is not None and o.ttl_ms is not None:
            share = 100 * o.removed_by_ttl / o.entries if o.entries else 0.0
            lines.append(f"  ttl {format_duration_ms(o.ttl_ms)} would have removed {o.removed_by_ttl} of "
                         f"{o.entries} entries by then ({share:.1f}%)")
    return "\n".join(lines)
