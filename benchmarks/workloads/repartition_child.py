"""One `ttlstate repartition` in a fresh JVM (started by `benchmarks.workloads.repartition`):
the session is started first, then only the repartition itself is timed."""

from __future__ import annotations

import sys
import time
from typing import Any

from benchmarks.harness.sparkjob import child_main, session


def run(params: dict[str, Any]) -> dict[str, Any]:
    from ttlstate.spark.repartition import repartition

    spark = session("ttlstate-repartition", params["provider_class"], params["confs"], True,
                    params["spark_confs"])
    try:
        started = time.monotonic()
        summary = repartition(spark, params["checkpoint"], int(params["partitions"]))
        seconds = time.monotonic() - started
        return {"repartition_s": round(seconds, 3), "rows": summary["rows"], "stores": len(summary["stores"])}
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(child_main(run))
