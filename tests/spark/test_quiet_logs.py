"""What a local session's console shows by default, as a user's `python job.py` sees it (no
`setLogLevel`): not one `store opened` line per store and partition (Spark filters that console
to WARN although its log level is INFO), and nothing about a dead state server when a query, or
the whole session, is stopped in the middle of a batch. Run as a child process: the console is its stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.spark.harness import fast_jvm_env

pytestmark = pytest.mark.spark

JOB = textwrap.dedent("""
    import json, os, sys, tempfile, time
    from pyspark.sql import SparkSession
    import ttlstate

    spark = ttlstate.configure(SparkSession.builder.master("local[2]")
                               .config("spark.sql.shuffle.partitions", "8")
                               .config("spark.ui.enabled", "false"), ttl="5 seconds").getOrCreate()
    src = tempfile.mkdtemp()
    with open(os.path.join(src, "a.json"), "w") as f:
        f.writelines(json.dumps({"k": f"k{i}"}) + "\\n" for i in range(200))
    q = (spark.readStream.schema("k STRING").json(src).dropDuplicates(["k"]).writeStream.format("noop")
         .option("checkpointLocation", tempfile.mkdtemp()).trigger(availableNow=True).start())
    q.awaitTermination()
    stores = q.lastProgress["stateOperators"][0]["numShufflePartitions"]
    # A query stopped while its batches run: Spark interrupts its tasks mid-request.
    rate = (spark.readStream.format("rate").option("rowsPerSecond", 20000).load()
            .selectExpr("value % 20000 AS k").dropDuplicates(["k"]))
    q = rate.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp()).start()
    while q.lastProgress is None or q.lastProgress["batchId"] < 1:
        time.sleep(0.2)
    time.sleep(1.5)
    q.stop()
    # A session stopped while a query's batches run: the state server stops with the application
    # under tasks still using it (they end as stopped, not with a dead server).
    q = rate.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp()).start()
    while q.lastProgress is None or q.lastProgress["batchId"] < 1:
        time.sleep(0.2)
    time.sleep(1.3)
    spark.stop()
    print("RESULT", json.dumps({"stores": stores}))
""")


def test_a_local_session_console_shows_no_store_lines_and_no_dead_server_at_stop(tmp_path) -> None:  # noqa: ANN001
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = fast_jvm_env({**os.environ, "PYSPARK_PYTHON": sys.executable})
    env.pop("TTLSTATE_LOG_LEVEL", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    result = [line for line in out.stdout.splitlines() if line.startswith("RESULT")]
    assert result and '"stores": 8' in result[0]  # eight stores opened, on ttlstate
    console = out.stderr
    assert "store opened" not in console
    ours = [line for line in console.splitlines() if " INFO ttlstate" in line]
    assert len(ours) <= 1, "\n".join(ours)  # the server's one start line
    assert "died" not in console and "ServerDied" not in console
