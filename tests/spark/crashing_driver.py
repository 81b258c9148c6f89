"""`python -m tests.spark.crashing_driver`: a driver that dies with SIGKILL mid-query.

Used by tests/spark/test_resources.py: it starts a session with ttlstate, runs a stateful
query (left running), prints one JSON line (the JVM's pid, the state server's pids and root)
and kills itself, so nothing of its own can clean up.
"""

from __future__ import annotations

import json
import os
import signal

from pyspark.sql import functions as F

from tests.spark.harness import TTLSTATE, Run, our_server_processes, session


def main() -> None:
    spark = session()
    run = Run(spark, TTLSTATE, lambda s: s["events"].groupBy("k").agg(F.sum("v")),
              {"events": "k STRING, v INT"}, "update")
    run.start()
    run.step([{"k": "a", "v": 1}, {"k": "b", "v": 2}])
    servers = our_server_processes()
    supervisor = next(cmd for _p, cmd in servers if "--root" in cmd)
    print(json.dumps({"jvm": spark._jvm.java.lang.ProcessHandle.current().pid(),  # type: ignore[union-attr]
                      "servers": [p.pid for p, _cmd in servers],
                      "root": supervisor[supervisor.index("--root") + 1]}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
