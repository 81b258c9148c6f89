"""The child side of a benchmark step: a SparkSession for one variant, and its progress.

Imported only by child processes (`growth_child`, `side_by_side_child`), which may run an
older ttlstate checkout: from ttlstate they use nothing but `ttlstate.configure(builder)`,
which every version has, and pass every other setting as a raw Spark conf.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

ROCKSDB_PREFIXES = ("rocksdbCommit", "rocksdbLoad", "rocksdbSaveZip", "rocksdbReplay",
                    "rocksdbNumReplay", "rocksdbNumLoaded", "rocksdbChangeLog", "rocksdbSstFileSize",
                    "rocksdbFilesCopied", "rocksdbBytesCopied", "rocksdbFilesReused")
TTLSTATE_METRICS = ("storeCommitTimeMs", "storeSnapshotTimeMs", "storeCallCount", "storeCallTimeMs",
                    "bloomFilterSkippedReadCount", "rocksdbSstFileSize", "rocksdbLoadLatencyMs",
                    "sstFilesReadInPlace", "inPlaceRangeReads", "inPlaceRangeReadBytes", "inPlaceLocalReads",
                    "inPlaceLocalReadBytes", "localSstFilesEvicted", "localSstBytesEvicted")


def session(app: str, provider_class: str, confs: Mapping[str, str], ttlstate_jar: bool,
            base_confs: Mapping[str, str]) -> Any:
    """A local SparkSession with the variant's provider; ttlstate's jar and server interpreter
    come from `ttlstate.configure` of whichever package this process imports."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app)
    for key, value in {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                       **base_confs}.items():
        builder = builder.config(key, value)
    if ttlstate_jar:
        import ttlstate

        builder = ttlstate.configure(builder)
    builder = builder.config("spark.sql.streaming.stateStore.providerClass", provider_class)
    for key, value in confs.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def progresses(query: Any) -> list[dict[str, Any]]:
    """The query's recent progress as plain dicts, data batches only, one per batch id."""
    by_id: dict[int, dict[str, Any]] = {}
    for p in query.recentProgress:
        d = json.loads(p.json)
        if d.get("numInputRows", 0) > 0:
            by_id[int(d["batchId"])] = d
    return [by_id[k] for k in sorted(by_id)]


def state_metrics(progress: Mapping[str, Any]) -> dict[str, Any]:
    """The first state operator's standard metrics and the custom ones worth keeping."""
    ops = progress.get("stateOperators") or [{}]
    op = ops[0]
    custom = op.get("customMetrics", {})
    kept = {k: v for k, v in custom.items() if k in TTLSTATE_METRICS or k.startswith(ROCKSDB_PREFIXES)}
    return {"state_rows": op.get("numRowsTotal"), "rows_updated": op.get("numRowsUpdated"),
            "commit_ms": op.get("commitTimeMs"), "all_updates_ms": op.get("allUpdatesTimeMs"),
            "memory_used_bytes": op.get("memoryUsedBytes"), "custom": kept}


def imported_ttlstate() -> str | None:
    """Where this process's ttlstate package lives (which tree a baseline run really used)."""
    try:
        import ttlstate
    except ImportError:
        return None
    return str(ttlstate.__file__)


def child_main(run: Callable[[dict[str, Any]], dict[str, Any]], argv: list[str] | None = None) -> int:
    """`python -m <child> PARAMS OUT`: run(params) and write its result as JSON."""
    params_path, out_path = (argv if argv is not None else sys.argv[1:])[:2]
    with open(params_path) as f:
        params = json.load(f)
    result = run(params)
    with open(out_path, "w") as f:
        json.dump(result, f)
    return 0
