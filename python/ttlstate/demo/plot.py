"""The demo's picture: state rows and checkpoint bytes per batch, ttlstate vs RocksDB provider.

Every series stays visible where two are equal (the aggregation and dropDuplicates are keyed by
the same sessions, so their state rows often are; all four are equal until the TTL first
expires something): each has its own color, marker shape and line style, each is drawn
narrower than the one before it, so the one below shows around it, and a series equal to an
earlier one in every batch says so in the legend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ttlstate.demo.runner import BatchStats


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    color: str
    marker: str
    linestyle: str
    linewidth: float
    markersize: float
    hollow: bool


def row_series(ttl: str) -> list[Series]:
    """The four state-row series in drawing order: each one narrower than the one before, so
    where lines coincide every one still shows as a band inside the previous one."""
    def label(key: str) -> str:
        provider, query = key.split("/")
        return f"{f'ttlstate (TTL {ttl})' if provider == 'ttlstate' else 'Spark RocksDB'} {query}"
    spec = (("rocksdb/aggregation", "tab:green", "o", "-", 7.0, 13, False),
            ("rocksdb/dropDuplicates", "tab:red", "s", "--", 4.0, 9, True),
            ("ttlstate/aggregation", "tab:blue", "^", "-", 2.2, 6, False),
            ("ttlstate/dropDuplicates", "black", "x", ":", 1.0, 5, False))
    return [Series(key, label(key), color, marker, style, width, size, hollow)
            for key, color, marker, style, width, size, hollow in spec]


def legend_labels(stats: list[BatchStats], series: list[Series]) -> dict[str, str]:
    """Each series' legend text; one equal to an earlier series in every batch says so."""
    out: dict[str, str] = {}
    for i, s in enumerate(series):
        values = [st.state_rows[s.key] for st in stats]
        same = [e.label for e in series[:i] if [st.state_rows[e.key] for st in stats] == values]
        out[s.key] = f"{s.label} (same as {same[0]})" if same else s.label
    return out


def figure(stats: list[BatchStats], ttl: str) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = [s.batch for s in stats]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    series = row_series(ttl)
    labels = legend_labels(stats, series)
    for s in series:
        ax1.plot(batches, [st.state_rows[s.key] for st in stats], linestyle=s.linestyle,
                 linewidth=s.linewidth, color=s.color, marker=s.marker, markersize=s.markersize,
                 markerfacecolor="none" if s.hollow else s.color, label=labels[s.key])
    ax1.set_title("State rows per batch (numRowsTotal)")
    ax1.set_xlabel("batch")
    ax1.set_ylabel("rows")
    ax1.legend(fontsize=8)
    for provider, style, marker, color in (("ttlstate", "-", "o", "tab:blue"),
                                           ("rocksdb", "--", "^", "tab:green")):
        ax2.plot(batches, [s.checkpoint_bytes[provider] / 1024 for s in stats], linestyle=style,
                 marker=marker, color=color,
                 label=f"ttlstate (TTL {ttl})" if provider == "ttlstate" else "Spark RocksDB")
    ax2.set_title("Checkpoint bytes on disk (both queries of a provider)")
    ax2.set_xlabel("batch")
    ax2.set_ylabel("KiB")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_demo(stats: list[BatchStats], path: str, ttl: str) -> str:
    import matplotlib.pyplot as plt

    fig = figure(stats, ttl)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
