"""`ttlstate inspect --ages`: a TTL advisor. Per operator, how long ago its entries were last
accessed and what a given TTL would remove now, from a stopped query's checkpoint.

An entry's last access is the 8-byte timestamp its value starts with (TtlValue), written on the
clock the store used (docs/clocks.md); its age is measured from the time the checkpoint recorded
for the store's newest version (the batch that wrote it), on the same clock, so the ages mean
the same under every time source and do not depend on when the command runs.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from ttlstate.config.parse import format_duration_ms
from ttlstate.ttl.expiry import is_expired

# Histogram buckets: upper bounds of age, in milliseconds (the last bucket is open).
BUCKETS_MS: tuple[int, ...] = (60_000, 600_000, 3_600_000, 6 * 3_600_000, 86_400_000,
                               7 * 86_400_000, 30 * 86_400_000)


@dataclass
class StoreAges:
    """The last-access timestamps of one store's entries and the time they are aged against."""

    operator: str
    operator_name: str | None
    reference_ms: int | None  # the newest version's recorded batch time
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
    removed_by_ttl: int | None  # entries a `--ttl` would remove now (None: no --ttl)
    ttl_ms: int | None
    ages_ms: list[int]


def _bucket_labels() -> list[str]:
    labels, low = [], "0"
    for b in BUCKETS_MS:
        labels.append(f"{low}-{format_duration_ms(b)}")
        low = format_duration_ms(b)
    return labels + [f">={low}"]


def _percentile(sorted_ages: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of a sorted, non-empty sequence."""
    rank = max(1, -(-len(sorted_ages) * q // 100))  # ceil(n * q / 100), at least 1
    return sorted_ages[int(rank) - 1]


def operator_ages(stores: list[StoreAges], ttl_ms: int | None) -> list[OperatorAges]:
    """Ages pooled per operator, their percentiles, histogram and what `ttl_ms` would remove
    (Flink's rule: an entry is expired at `ts + ttl <= now`)."""
    by_op: dict[str, list[StoreAges]] = {}
    for s in stores:
        by_op.setdefault(s.operator, []).append(s)
    out = []
    for op in sorted(by_op, key=lambda o: (len(o), o)):
        group = by_op[op]
        ages = sorted(a for s in group for a in s.ages())
        unaged = sum(len(s.timestamps) for s in group if s.reference_ms is None)
        counts = [0] * (len(BUCKETS_MS) + 1)
        for a in ages:
            counts[bisect.bisect_right(BUCKETS_MS, a)] += 1
        pct = ({} if not ages else
               {"p50": _percentile(ages, 50), "p90": _percentile(ages, 90),
                "p99": _percentile(ages, 99), "max": ages[-1]})
        removed = None
        if ttl_ms is not None:
            removed = sum(1 for s in group if s.reference_ms is not None
                          for ts in s.timestamps if is_expired(ts, ttl_ms, s.reference_ms))
        out.append(OperatorAges(op, group[0].operator_name, len(ages) + unaged, unaged, pct,
                                list(zip(_bucket_labels(), counts, strict=True)), removed, ttl_ms,
                                ages))
    return out


def _age(ms: int) -> str:
    """An age for people: 0s, 45s, 12m, 3h, 2d (rounded down to the largest unit)."""
    if ms < 0:
        return "-" + _age(-ms)
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def render_ages(ops: list[OperatorAges]) -> str:
    lines = []
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
            lines.append(f"  ttl {format_duration_ms(o.ttl_ms)} would remove {o.removed_by_ttl} of "
                         f"{o.entries} entries now ({share:.1f}%)")
    return "\n".join(lines)


def plot_ages(path: str, ops: list[OperatorAges]) -> None:
    """A PNG of each operator's age histogram (log-spaced ages), with the `--ttl` line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(ops), 1, figsize=(8, 2.8 * max(1, len(ops))), squeeze=False)
    for ax, o in zip(axes[:, 0], ops, strict=True):
        seconds = [max(a, 1) / 1000 for a in o.ages_ms]  # log axis: an age of 0 drawn at 1 ms
        if seconds:
            low, high = min(seconds), max(seconds)
            edges = [low * (high / low) ** (i / 30) for i in range(31)] if high > low else 10
            ax.hist(seconds, bins=edges, color="#4878d0")
            ax.set_xscale("log")
        if o.ttl_ms is not None:
            ax.axvline(o.ttl_ms / 1000, color="#d65f5f", linestyle="--",
                       label=f"ttl {format_duration_ms(o.ttl_ms)}: removes {o.removed_by_ttl}")
            ax.legend(loc="upper right")
        ax.set_title(f"operator {o.operator} ({o.name or 'name unknown'}): {o.entries} entries")
        ax.set_xlabel("age of last access (s)")
        ax.set_ylabel("entries")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
