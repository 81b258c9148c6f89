"""The growth benchmark's PNG: batch and commit time against state size, restore time, RSS.

Every variant gets its own color, marker and line style, and baseline variants hollow
markers, so two nearly equal series (ttlstate and ttlstate@<sha> of the same code) both stay
visible where they overlap.
"""

from __future__ import annotations

from typing import Any

MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINES = ("-", "--", ":", "-.")


def _style(i: int, baseline: bool) -> dict[str, Any]:
    import matplotlib.pyplot as plt

    color = plt.get_cmap("tab10")(i % 10)
    return {"color": color, "marker": MARKERS[i % len(MARKERS)], "linestyle": LINES[i % len(LINES)],
            "markersize": 8 - 1.5 * (i % 3), "markerfacecolor": "none" if baseline else color}


def _curves(ax: Any, result: dict[str, Any], field: str, title: str) -> None:
    """field per batch against state rows after the batch, every run of every variant."""
    for i, v in enumerate(result["variants"]):
        style = _style(i, v["baseline"] is not None)
        for r in (r for r in result["runs"] if r["variant"] == v["name"]):
            xs = [b["state_rows"] / 1e6 for b in r["batches"]]
            ys = [(b[field] or 0) / 1000 for b in r["batches"]]
            ax.plot(xs, ys, label=v["name"] if r["round"] == 0 else None,
                    alpha=1.0 if r["round"] == 0 else 0.5, **style)
    ax.set_xlabel("state after the batch (M keys)")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _bars(ax: Any, result: dict[str, Any], fields: list[tuple[str, str, float]], title: str,
          unit: str) -> None:
    """One group of bars per variant (summary values divided by scale), labelled with values."""
    names = [s["variant"] for s in result["summary"]]
    width = 0.8 / len(fields)
    for j, (field, label, scale) in enumerate(fields):
        vals = [(s.get(field) or 0) / scale for s in result["summary"]]
        xs = [k + j * width for k in range(len(names))]
        bars = ax.bar(xs, vals, width, label=label, hatch=("", "//", "..")[j % 3], edgecolor="black")
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
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    _curves(axes[0][0], result, "batch_ms", "batch time (triggerExecution)")
    _curves(axes[0][1], result, "commit_ms", "state operator commit time")
    _bars(axes[1][0], result, [("restore_ms", "restore batch", 1000)], "restore into a fresh JVM",
          "seconds")
    _bars(axes[1][1], result, [("jvm_peak_rss_mb", "JVM peak RSS", 1), ("server_peak_rss_mb",
                               "state server peak RSS", 1), ("checkpoint_bytes", "checkpoint", 1e6)],
          "memory while growing, checkpoint size", "MB")
    fig.suptitle(f"Growth: dropDuplicates, {p['batches']} x {p['keys_per_batch']:,} new keys, "
                 f"{p['partitions']} partitions, {p['master']} ({result['started']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
