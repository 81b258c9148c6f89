"""One PNG of the current headline figures, drawn from committed result files only.

Throughput on a hot working set and on cold state (`spark_side_by_side`, and its `--preset
cold-uniform`), the restore in a fresh JVM and the median batch while the state grows to 5M keys
(`growth`), each the medians of three rounds in alternating order, Spark's RocksDB provider
against ttlstate with TTL on; a ratio is the median of the rounds' ratios (each round runs both
back to back). The README and docs/performance.md show it, with the same numbers in their text:

    python -m benchmarks.harness.headline_plot            # the defaults below -> docs/img/headline.png
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any, NamedTuple

RESULTS = Path(__file__).resolve().parents[1] / "results"
DATE = "2026-11-27"
DEFAULTS = {
    "hot_set": RESULTS / f"{DATE}-hot-set-pending-index-ab.json",
    "cold_uniform": RESULTS / f"{DATE}-cold-uniform-pending-index.json",
    "growth": RESULTS / "2026-11-28-growth-5m-final.json",
}
OUT = Path(__file__).resolve().parents[2] / "docs" / "img" / "headline.png"
SPARK, TTLSTATE = "Spark RocksDB", "ttlstate (TTL on)"


def _load(path: Path) -> Any:
    with open(path) as f:
        return json.load(f)


class Figure(NamedTuple):
    """One case: each provider's median over the rounds, and ttlstate's ratio in each round."""

    spark: float
    ours: float
    rounds: list[float]

    @property
    def ratio(self) -> float:
        """The headline ratio: the median of the rounds' ratios."""
        return statistics.median(self.rounds)


def _ratios(spark: list[float], ours: list[float]) -> list[float]:
    return [o / s for s, o in zip(spark, ours, strict=True)]


def medians(rows: list[dict[str, Any]], workload: str) -> Figure:
    """Spark's RocksDB provider and ttlstate in k rows/s (the medians of the rounds of one run),
    and the rounds' ratios."""
    by = {r["provider"]: r for r in rows if r["workload"] == workload}
    spark, ours = by["rocksdb"], by["ttlstate-ttl-on"]
    return Figure(spark["rows_per_s"] / 1000, ours["rows_per_s"] / 1000,
                  _ratios(spark["rows_per_s_per_round"], ours["rows_per_s_per_round"]))


CASES = (("hot_set", "aggregation", "hot count"), ("hot_set", "dropDuplicates", "hot dedup"),
         ("cold_uniform", "aggregation", "cold count"), ("cold_uniform", "dropDuplicates", "cold dedup"))


def figures(paths: dict[str, Path]) -> dict[str, dict[str, Figure]]:
    """Per panel and case: Spark's RocksDB provider and ttlstate, in the panel's unit, and the
    rounds' ratios."""
    out: dict[str, dict[str, Figure]] = {"throughput": {}, "restore": {}, "batch": {}}
    for source, workload, case in CASES:
        out["throughput"][case] = medians(_load(paths[source]), workload)
    growth = {s["variant"]: s for s in _load(paths["growth"])["summary"]}
    for panel, field, per_round in (("restore", "restore_ms", "restore_ms_per_round"),
                                    ("batch", "median_batch_ms", "median_batch_ms_per_round")):
        spark, ours = growth["rocksdb"], growth["ttlstate"]
        out[panel]["5M keys"] = Figure(spark[field] / 1000, ours[field] / 1000,
                                       _ratios(spark[per_round], ours[per_round]))
    return out


def plot(paths: dict[str, Path], out: Path) -> dict[str, dict[str, Figure]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = figures(paths)
    panels = (("throughput", "throughput: 1M rows over 200k keys (hot), 4M over 4M keys (cold)\n"
                             "(k rows/s, higher is better)"),
              ("restore", "restore in a fresh JVM, median of 3 rounds\n(seconds, lower is better)"),
              ("batch", "median batch while growing by 500k keys\n(seconds, lower is better)"))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.4), gridspec_kw={"width_ratios": [2, 1, 1]})
    for ax, (name, title) in zip(axes, panels, strict=True):
        cases = list(figs[name])
        xs = range(len(cases))
        for j, (label, color) in enumerate(((SPARK, "tab:blue"), (TTLSTATE, "tab:orange"))):
            vals = [figs[name][c][j] for c in cases]
            bars = ax.bar([x + (j - 0.5) * 0.38 for x in xs], vals, 0.38, label=label, color=color,
                          edgecolor="black")
            ax.bar_label(bars, fmt="%.1f", fontsize=8)
        for x, c in zip(xs, cases, strict=True):
            f = figs[name][c]
            ax.annotate(f"{f.ratio:.2f}x", (x + 0.19, f.ours), xytext=(0, 12),
                        textcoords="offset points", ha="center", fontsize=9, weight="bold")
        ax.set_xticks(list(xs), cases)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, max(max(f.spark, f.ours) for f in figs[name].values()) * 1.3)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("ttlstate against Spark's RocksDB provider (both in the same run in each panel), "
                 f"local[2], 4 partitions, 2 cores, {DATE}; ratios: median of 3 rounds", fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return figs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in DEFAULTS.items():
        ap.add_argument("--" + name.replace("_", "-"), type=Path, default=default)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    figs = plot({name: getattr(args, name) for name in DEFAULTS}, args.out)
    for panel, cases in figs.items():
        for case, f in cases.items():
            rounds = ", ".join(f"{r:.2f}x" for r in f.rounds)
            print(f"{panel} {case}: Spark RocksDB {f.spark:.2f}, ttlstate {f.ours:.2f} ({f.ratio:.2f}x; "
                  f"rounds {rounds})")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
