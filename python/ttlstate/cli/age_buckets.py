"""The buckets of the advisor's age histogram, chosen from the ages themselves.

Fixed buckets (a minute, ten minutes, an hour, ...) put every entry of a test with a TTL of
seconds into one bar. Instead: a narrow range of ages gets equal-width buckets of a round size
(500ms, 1s, 5m, ...) up to the oldest age, a wide one round buckets spaced by factors (1s, 5s,
1m, 10m, 1h, ...); the TTL being assessed is always an edge, so the bars from it on are
exactly the entries it would remove (Flink's rule: expired at age >= TTL).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ttlstate.config.parse import format_duration_ms

_S, _M, _H, _D = 1000, 60_000, 3_600_000, 86_400_000
# Round ages, in milliseconds.
LADDER: tuple[int, ...] = (
    1, 2, 5, 10, 20, 50, 100, 200, 500,
    _S, 2 * _S, 5 * _S, 10 * _S, 15 * _S, 30 * _S,
    _M, 2 * _M, 5 * _M, 10 * _M, 15 * _M, 30 * _M,
    _H, 2 * _H, 3 * _H, 6 * _H, 12 * _H,
    _D, 2 * _D, 7 * _D, 14 * _D, 30 * _D, 90 * _D, 180 * _D, 365 * _D,
)
MAX_BARS = 10
NARROW = 20  # oldest / youngest positive age up to which buckets are of equal width


def bucket_edges(ages: Sequence[int], ttl_ms: int | None = None) -> list[int]:
    """Increasing upper edges (ms) of all but the last, open bucket, for `ages` (ms, >= 0)."""
    positive = [a for a in ages if a > 0]
    if not positive:
        edges = [LADDER[0]]
    else:
        low, high = min(positive), max(positive)
        if high <= NARROW * low:
            step = next((v for v in LADDER if v * (MAX_BARS - 2) >= high), LADDER[-1])
            edges = [step * k for k in range(1, high // step + 1)] or [step]
        else:
            first = max(v for v in LADDER if v <= low)  # so the youngest are not in 0's bar
            inside = [v for v in LADDER if first < v <= high]
            take = max(1, -(-len(inside) // (MAX_BARS - 2)))  # every take-th, from the oldest
            edges = sorted({first, *inside[::-1][::take]})
    if ttl_ms is not None and ttl_ms > 0 and ttl_ms not in edges:
        bisect.insort(edges, ttl_ms)
    return edges


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """`0-500ms`, `500ms-1s`, ..., `>=3s`: one per bucket."""
    labels, low = [], "0"
    for e in edges:
        labels.append(f"{low}-{format_duration_ms(e)}")
        low = format_duration_ms(e)
    return labels + [f">={low}"]


def bucket_counts(ages: Sequence[int], edges: Sequence[int]) -> list[int]:
    """Entries per bucket: an age equal to an edge is in the bucket that edge starts (negative
    ages, of entries accessed after the time they are measured from, count in the first)."""
    counts = [0] * (len(edges) + 1)
    for a in ages:
        counts[bisect.bisect_right(edges, a)] += 1
    return counts
