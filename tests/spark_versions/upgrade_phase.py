"""One Spark line's part of the upgrade test (tests/spark_versions/test_upgrade.py), run in that
line's venv: `python -m tests.spark_versions.upgrade_phase ROOT STEP [STEP ...]`.

Each query of QUERIES, on ttlstate and on Spark's RocksDB provider, picks up its checkpoint under
ROOT where the previous line left it, processes the given steps of STEPS, and adds what each batch
wrote (and which step it belongs to) to ROOT/<query>-<provider>.json."""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import DataFrame

from tests.spark.harness import EVENTS_SCHEMA, ROCKSDB, TTLSTATE, Run, ev, session
from ttlstate.config import keys as K

# TTL in event time (10 s, the watermark 5 s behind the newest event): a and b, written at a
# watermark of 5 s on the first line, are forgotten at step 4 (watermark 35 s) on a later line.
STEPS = [[ev("z", 1, 10)], [ev("a", 1, 11), ev("b", 1, 12)], [ev("a", 1, 13)], [ev("c", 1, 40)],
         [ev("a", 1, 41), ev("b", 1, 42)], [ev("d", 1, 43), ev("a", 1, 44)]]
TTL_CONFS = {K.TTL.key: "10s", K.TIME_SOURCE.key: "watermark"}


def dedup(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].withWatermark("ts", "5 seconds").dropDuplicates(["k"])


def counts(s: dict[str, DataFrame]) -> DataFrame:
    return s["events"].withWatermark("ts", "5 seconds").groupBy("k").count()


QUERIES = {"dedup": (dedup, "append"), "counts": (counts, "update")}
PROVIDERS = {"ttlstate": TTLSTATE, "rocksdb": ROCKSDB}


def main(root: str, steps: list[int]) -> None:
    spark = session()
    try:
        for query, (build, mode) in QUERIES.items():
            for name, provider in PROVIDERS.items():
                confs = TTL_CONFS if provider == TTLSTATE else {}
                run = Run(spark, provider, build, {"events": EVENTS_SCHEMA}, mode, confs,
                          root=os.path.join(root, f"{query}-{name}"))
                run.step_no = len(os.listdir(os.path.join(run.root, "events")))
                assert run.step_no == steps[0], (query, name, run.step_no, steps)
                run.start()
                try:
                    for step in steps:
                        run.step(STEPS[step])
                finally:
                    run.stop()
                log = os.path.join(root, f"{query}-{name}.json")
                seen = json.load(open(log)) if os.path.exists(log) else []
                seen += [{"batch": b, "step": run.step_of_batch[b], "rows": [list(r) for r in run.outputs[b]],
                          "spark": spark.version} for b in sorted(run.outputs)]
                with open(log, "w") as f:
                    json.dump(seen, f, default=str)  # event times as text
    finally:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], [int(s) for s in sys.argv[2:]])
