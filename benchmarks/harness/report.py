"""Markdown summary and plots of one `run_all` report."""

from __future__ import annotations

import os
import statistics
from typing import Any


def _table(rows: list[dict[str, object]], cols: list[str]) -> list[str]:
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return out


def _plot_spark(rows: list[dict[str, object]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted({str(r["workload"]) for r in rows})
    providers = list(dict.fromkeys(str(r["provider"]) for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(providers))
    for i, p in enumerate(providers):
        vals = [next((float(r["rows_per_s"]) for r in rows  # type: ignore[arg-type]
                      if r["provider"] == p and r["workload"] == w), 0.0) for w in workloads]
        ax.bar([x + i * width for x in range(len(workloads))], vals, width, label=p)
    ax.set_xticks([x + width * (len(providers) - 1) / 2 for x in range(len(workloads))], workloads)
    ax.set_ylabel("input rows/s")
    ax.set_title("Spark state store providers, local[2]")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


GROWTH_COLUMNS = ["variant", "median_batch_ms", "first_batch_ms", "restore_ms", "restore_load_ms",
                  "median_commit_ms", "snapshot_ms_total", "jvm_peak_rss_mb", "server_peak_rss_mb",
                  "checkpoint_bytes", "vs rocksdb (batch, restore)", "vs baseline (batch, restore)",
                  "restore_state_rows_ok", "loadavg_1m_mean"]


def _pair(ratios: object) -> str:
    """'median batch ratio, restore ratio' of a summary's ratio dict, or ''."""
    if not isinstance(ratios, dict):
        return ""
    return f"{ratios.get('median_batch_ms')}, {ratios.get('restore_ms')}"


def _batch_median(runs: list[dict[str, Any]], variant: str, i: int) -> object:
    """Median over the variant's rounds of batch i's time."""
    times = [r["batches"][i]["batch_ms"] for r in runs if r["variant"] == variant and i < len(r["batches"])]
    return statistics.median(times) if times else ""


def growth_section(result: dict[str, Any]) -> list[str]:
    """The growth benchmark: its plot, the summary per variant, and batch time per batch for
    every variant side by side (how each grows with the state)."""
    p = result["params"]
    lines = ["## Growth: state growing batch after batch, then a restore", "",
             f"dropDuplicates, {p['batches']} x {p['keys_per_batch']:,} new keys, "
             f"{p['partitions']} partitions, {p['master']}; each variant in its own fresh JVM. "
             "Ratios are this variant's value / the other's (below 1 is better).", "",
             "![growth](growth.png)", ""]
    summary = [{**s, "vs rocksdb (batch, restore)": _pair(s.get("ratio_to_rocksdb")),
                "vs baseline (batch, restore)": _pair(s.get("ratio_to_baseline"))}
               for s in result["summary"]]
    lines += _table(summary, GROWTH_COLUMNS) + [""]
    names = [s["variant"] for s in result["summary"]]
    per_batch = [{"batch": i, "state rows": b["state_rows"],
                  **{n: _batch_median(result["runs"], n, i) for n in names}}
                 for i, b in enumerate(result["runs"][0]["batches"])]
    lines += ["Batch time (ms) per batch (median over rounds):", ""]
    lines += _table(per_batch, ["batch", "state rows", *names]) + [""]
    return lines


def write_summary(report: dict[str, object], out_dir: str) -> str:
    m = report["machine"]
    lines = ["# ttlstate benchmark report", "",
             f"Machine: {m}", f"Quick mode: {report['quick']}", ""]
    if "store" in report:
        lines += ["## Embedded store operations per second", ""]
        rows = report["store"]  # type: ignore[assignment]
        lines += _table(rows, list(rows[0].keys())) + [""]  # type: ignore[index]
    if "bridge" in report:
        rows = report["bridge"]  # type: ignore[assignment]
        lines += ["## Through the state server (bridge)", ""]
        lines += _table(rows, list(rows[0].keys())) + [""]  # type: ignore[index]
    if "compaction" in report:
        lines += ["## Compaction throughput", ""]
        rows = report["compaction"]  # type: ignore[assignment]
        if isinstance(rows, list) and rows:
            lines += _table(rows, list(rows[0].keys())) + [""]
        else:
            lines += [f"```\n{rows}\n```", ""]
    if "spark" in report:
        rows = report["spark"]  # type: ignore[assignment]
        png = os.path.join(out_dir, "spark_providers.png")
        _plot_spark(rows, png)  # type: ignore[arg-type]
        lines += ["## Spark providers side by side", "",
                  "![providers](spark_providers.png)", ""]
        lines += _table(rows, ["workload", "provider", "rows", "seconds", "rows_per_s",  # type: ignore[arg-type]
                               "ratio_to_rocksdb", "ratio_to_baseline", "round_trips_per_input_row",
                               "reads_answered_by_key_filter"]) + [""]
    if "growth" in report:
        lines += growth_section(report["growth"])  # type: ignore[arg-type]
    if "churn" in report:
        lines += ["## State size under churn, with and without TTL", "",
                  "![churn](churn/demo.png)", ""]
    path = os.path.join(out_dir, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
