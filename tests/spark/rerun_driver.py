"""`python -m tests.spark.rerun_driver CHECKPOINT SOURCE_DIR BATCH CONFS_JSON`: a second driver.

Used by tests/spark/test_two_drivers.py. It starts the same query as the test's running one on
CHECKPOINT, a copy of the running query's logs as of an earlier batch whose state folder is the
running query's own (a symlink), so it re-runs batch BATCH and commits its state versions into
the running query's state files, as a second driver started on a live checkpoint (or a zombie
task) does before Spark stops it. It stops once that batch's commit is in its commit log, and
prints one JSON line: the batches it committed (the next batch may have begun by then: it reads
the same next file as the running query's did, so it commits the same state).
"""

from __future__ import annotations

import json
import os
import sys

from tests.spark.harness import TTLSTATE, poll_until, session
from tests.spark.test_two_drivers import SCHEMA, build


def main() -> None:
    checkpoint, source, batch, confs = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    spark = session(confs=confs, ttl="1h")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", TTLSTATE)
    committed: list[int] = []
    query = (build(spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source))
             .writeStream.outputMode("update")
             .foreachBatch(lambda df, b: committed.append(b) if df.collect() is not None else None)
             .option("checkpointLocation", checkpoint).start())
    done = poll_until(lambda: os.path.exists(os.path.join(checkpoint, "commits", str(batch)))
                      or query.exception() is not None, 120)
    error = query.exception()
    query.stop()
    report: dict[str, object] = {"committed": committed, "done": done}
    if error is not None:
        report["error"] = str(error)[:2000]
    print(json.dumps(report), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
