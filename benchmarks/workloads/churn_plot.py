"""The churn benchmark's PNG: rows/s and state rows per batch over the query's time.

The x axis is the query's time at the end of each batch (batch durations summed), so a slow
variant's line is long and its TTL has more time to expire keys; a variant that did not finish
shows the batches it did. Styles come from the growth plot, so the two read alike.
"""

from __future__ import annotations

from typing import Any

from benchmarks.workloads.growth_plot import _style


def series(batches: list[dict[str, Any]]) -> tuple[list[float], list[float], list[float]]:
    """Seconds since the start at each batch's end, its rows/s, and its state rows in thousands."""
    t, xs, rate, state = 0.0, [], [], []
    for b in batches:
        seconds = (b["batch_ms"] or 0) / 1000
        t += seconds
        xs.append(t)
        rate.append(b["input_rows"] / seconds / 1000 if seconds else 0.0)
        state.append(b["state_rows"] / 1000)
    return xs, rate, state


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for i, row in enumerate(result["summary"]):
        runs = [r for r in result["runs"] if r["variant"] == row["variant"] and r["batches"]]
        if not runs:
            continue
        xs, rate, state = series(runs[0]["batches"])
        label = row["variant"] + ("" if "rows_per_s" in row else " (did not finish)")
        top.plot(xs, rate, label=label, **_style(i, False))
        bottom.plot(xs, state, label=label, **_style(i, False))
    p = result["params"]
    top.set_title(f"churn: {p['batches']} batches of {p['rows_per_batch']:,} rows, each key active "
                  f"3 batches, TTL {p['ttl']}")
    top.set_ylabel("k rows/s in the batch")
    bottom.set_ylabel("state rows (k)")
    bottom.set_xlabel("query time (s)")
    for ax in (top, bottom):
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
