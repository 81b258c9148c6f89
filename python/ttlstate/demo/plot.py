"""The demo's picture: state rows and checkpoint bytes per batch, ttlstate vs RocksDB provider."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ttlstate.demo.runner import BatchStats


def plot_demo(stats: list[BatchStats], path: str, ttl: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = [s.batch for s in stats]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, style in (("ttlstate/aggregation", "-"), ("rocksdb/aggregation", "--"),
                       ("ttlstate/dropDuplicates", "-"), ("rocksdb/dropDuplicates", "--")):
        label = key.replace("ttlstate", f"ttlstate (TTL {ttl})").replace("rocksdb", "Spark RocksDB")
        ax1.plot(batches, [s.state_rows[key] for s in stats], style, marker=".", label=label)
    ax1.set_title("State rows per batch (numRowsTotal)")
    ax1.set_xlabel("batch")
    ax1.set_ylabel("rows")
    ax1.legend(fontsize=8)
    for provider, style in (("ttlstate", "-"), ("rocksdb", "--")):
        ax2.plot(batches, [s.checkpoint_bytes[provider] / 1024 for s in stats], style, marker=".",
                 label=f"ttlstate (TTL {ttl})" if provider == "ttlstate" else "Spark RocksDB")
    ax2.set_title("Checkpoint bytes on disk (both queries)")
    ax2.set_xlabel("batch")
    ax2.set_ylabel("KiB")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
