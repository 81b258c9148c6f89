"""The growth benchmark's PNG: batch and commit time against state size, restore time, RSS.

Every variant gets its own color, marker and line style, and baseline variants hollow
markers, so two nearly equal series (ttlstate and ttlstate@<sha> of the same code) both stay
visible where they overlap.
"""

from __future__ import annotations

import itertools
from typing import Any

MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINES = ("-", "--", ":", "-.")


def _style(i: int, baseline: bool) -> dict[str, Any]:
    import matplotlib.pyplot as plt

    color = plt.get_cmap("tab10")(i % 10)
    return {"color": color, "marker": MARKERS[i % len(MARKERS)], "linestyle": LINES[i % len(LINES)],
            "markersize": 8 - 1.5 * (i % 3), "markerfacecolor": "none" if baseline else color}


def _curves(ax: Any, result: dict[str, Any], field: str, title: str, unit: str = "seconds",
            scale: float = 1000, cumulative: bool = False) -> None:
    """field / scale per batch (or its running sum) against state rows after the batch, every
    run of every variant."""
    for i, v in enumerate(result["variants"]):
        style = _style(i, v["baseline"] is not None)
        for r in (r for r in result["runs"] if r["variant"] == v["name"]):
            xs = [b["state_rows"] / 1e6 for b in r["batches"]]
            ys = [(b.get(field) or 0) / scale for b in r["batches"]]
            if cumulative:
                ys = list(itertools.accumulate(ys))
            ax.plot(xs, ys, label=v["name"] if r["round"] == 0 else None,
                    alpha=1.0 if r["round"] == 0 else 0.5, **style)
    ax.set_xlabel("state after the batch (M keys)")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _bars(ax: Any, result: dict[str, Any], fields: list[tuple[str, str]], title: str, unit: str,
          scale: float) -> None:
    """Per variant (in its color), one bar per field of its summary divided by scale; several
    fields are told apart by hatching. Every bar is labelled with its value."""
    index = {v["name"]: i for i, v in enumerate(result["variants"])}
    names = [s["variant"] for s in result["summary"]]
    width = 0.8 / len(fields)
    for j, (field, label) in enumerate(fields):
        vals = [(s.get(field) or 0) / scale for s in result["summary"]]
        colors = [_style(index[n], False)["color"] for n in names]
        bars = ax.bar([k + j * width for k in range(len(names))], vals, width, color=colors,
                      hatch=("", "//", "..")[j % 3], edgecolor="black", label=label)
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.set_xticks([k + width * (len(fields) - 1) / 2 for k in range(len(names))], names,
                  rotation=15, fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title)
    if len(fields) > 1:
        ax.legend(fontsize=8)


def plot(result: dict[str, Any], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = result["params"]
    fig, axes = plt.subplots(2, 4, figsize=(21, 9))
    _curves(axes[0][0], result, "batch_ms", "batch time (triggerExecution)")
    _curves(axes[0][1], result, "commit_ms", "state operator commit time (sum over partitions)")
    _curves(axes[0][2], result, "snapshot_ms", "snapshot time reported by the batch")
    _curves(axes[0][3], result, "checkpoint_bytes_written", "bytes written to the checkpoint by the batch",
            "MB", 1e6)
    _curves(axes[1][3], result, "checkpoint_bytes_written",
            "bytes written to the checkpoint, all batches so far", "MB", 1e6, cumulative=True)
    _bars(axes[1][0], result, [("restore_ms", "restore batch")], "restore: one batch in a fresh JVM",
          "seconds", 1000)
    _bars(axes[1][1], result, [("jvm_peak_rss_mb", "JVM"), ("server_peak_rss_mb", "state server")],
          "peak RSS while growing", "MB", 1)
    _bars(axes[1][2], result, [("checkpoint_bytes", "checkpoint")], "checkpoint size after growing",
          "MB", 1e6)
    fig.suptitle(f"Growth: dropDuplicates, {p['batches']} x {p['keys_per_batch']:,} new keys, "
                 f"{p['partitions']} partitions, {p['master']}, checkpoint on "
                 f"{p.get('checkpoint_fs', 'local')} ({result['started']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
