"""Markdown summary and plots of one `run_all` report."""

from __future__ import annotations

import os


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
                               "ratio_to_rocksdb", "round_trips_per_input_row",
                               "reads_answered_by_key_filter"]) + [""]
    if "churn" in report:
        lines += ["## State size under churn, with and without TTL", "",
                  "![churn](churn/demo.png)", ""]
    path = os.path.join(out_dir, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
