"""A user's first job, run by tests/packaging/test_wheel_pythons.py with `spark-submit` from a venv
where only the wheel (and what it pulls in) is installed:

    PYSPARK_PYTHON=<venv>/bin/python <venv>/bin/spark-submit --master local[2] \\
        --jars $(ttlstate jar) --conf spark.sql.extensions=ttlstate.spark.TtlStateExtensions \\
        submit_job.py WORK_DIR [ENGINE]

and by test_source_install.py as `python submit_job.py WORK_DIR rocksdict` (configure() then
launches the JVM with the jar), from a venv with a source install.

A streaming count per key on ttlstate's ENGINE (default native) with a 2 s TTL, fed three JSON
files, one per micro-batch, with more than the TTL between batches: every key expires before the
next batch, so each batch's counts are the counts of that batch alone (without TTL they would add
up). The files are moved into the input directory one at a time, so the batches and their counts are
exact. The last line printed is `RESULT <json>`: the Python, the provider and engine confs, the
provider the checkpoint's offset log pinned, each batch's output rows and the ttlstate metrics
summed over the batches.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

from pyspark.sql import SparkSession

import ttlstate

TTL_S = 2
BATCHES = [["a", "a", "b"], ["a", "c"], ["a", "a", "a", "c"]]
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
ENGINE_KEY = "spark.sql.streaming.stateStore.ttlstate.engine"


def main(work: str, engine: str = "native") -> None:
    staging, input_dir, ck = (os.path.join(work, d) for d in ("staging", "input", "ck"))
    os.makedirs(staging)
    os.makedirs(input_dir)
    builder = (SparkSession.builder.master("local[2]").appName("ttlstate-submit-check")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.showConsoleProgress", "false"))
    # incremental cleanup off and a full compaction at every commit: the expired keys that are not
    # read again (b) are removed by the native engine's compaction filter (rocksdict has none).
    spark = ttlstate.configure(builder, ttl=f"{TTL_S}s", engine=engine, incremental_size=0,
                               compact_every=1).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    query = (spark.readStream.schema("k STRING").option("maxFilesPerTrigger", 1).json(input_dir)
             .groupBy("k").count()
             .writeStream.outputMode("update").format("memory").queryName("counts")
             .option("checkpointLocation", ck).start())
    outputs: list[list[list[object]]] = []
    seen: Counter[tuple[str, int]] = Counter()
    for i, keys in enumerate(BATCHES):
        if i:
            time.sleep(TTL_S + 1.5)  # the next batch's timestamp is more than the TTL later
        name = f"part-{i}.json"
        with open(os.path.join(staging, name), "w") as f:
            f.writelines(json.dumps({"k": k}) + "\n" for k in keys)
        os.rename(os.path.join(staging, name), os.path.join(input_dir, name))  # whole files only
        query.processAllAvailable()
        rows = Counter((r["k"], int(r["count"])) for r in spark.sql("SELECT k, count FROM counts").collect())
        outputs.append(sorted([k, n] for k, n in (rows - seen).elements()))
        seen = rows
    progress = query.recentProgress
    query.stop()
    metrics: Counter[str] = Counter()
    for p in progress:
        for op in p["stateOperators"]:
            metrics.update({k: int(v) for k, v in op.get("customMetrics", {}).items()})
    with open(os.path.join(ck, "offsets", "0")) as f:
        pinned = json.loads(f.read().splitlines()[1])["conf"].get(PROVIDER_KEY)
    result = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "provider": spark.conf.get(PROVIDER_KEY),
        "engine": spark.conf.get(ENGINE_KEY),
        "pinned_provider": pinned,
        "batches": len([p for p in progress if p["numInputRows"]]),
        "outputs": outputs,
        "metrics": dict(sorted(metrics.items())),
    }
    spark.stop()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
