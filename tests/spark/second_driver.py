"""A second driver on a running query's checkpoint, as a real second driver process.

`second_driver_checkpoint(run, batch)` copies the running query's logs as of now, less the
commit of `batch`, and links the running query's own state folder into the copy. A driver started
there (`run_second_driver`, which runs `python -m tests.spark.second_driver SPEC`) re-runs batch
`batch` and commits its state versions into the running query's state files, as a second driver
started on a live checkpoint (or a zombie task) does before Spark stops it. It stops once that
batch's commit is in its commit log (the next batch may have begun by then: it reads the same
next file as the running query's did, so it commits the same state) and reports the batches it
committed. Used by tests/spark/test_two_drivers.py and the chaos soak.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tests.spark.harness import TTLSTATE, Run, poll_until, session

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def second_driver_checkpoint(running: Run, batch: int) -> str:
    copy = os.path.join(tempfile.mkdtemp(prefix="ttlstate-second-"), "ck")
    shutil.copytree(running.checkpoint, copy, ignore=shutil.ignore_patterns("state"))
    for log in ("offsets", "commits"):  # the logs end at `batch`, whose commit is missing
        for name in os.listdir(os.path.join(copy, log)):
            stem = name.lstrip(".").split(".")[0]
            if stem.isdigit() and (int(stem) > batch or (log == "commits" and int(stem) == batch)):
                os.unlink(os.path.join(copy, log, name))
    os.symlink(os.path.join(running.checkpoint, "state"), os.path.join(copy, "state"))
    return copy


def run_second_driver(running: Run, checkpoint: str, batch: int, query: str,
                      ttl_options: dict[str, str], output_mode: str = "update") -> dict:
    """Run the second driver to completion; `query` is "module:function" building the query from
    the dict of sources, as `running` was built."""
    (name, schema), = running.schemas.items()
    spec = {"checkpoint": checkpoint, "source": os.path.join(running.root, name), "name": name,
            "schema": schema, "batch": batch, "query": query, "mode": output_mode,
            "confs": dict(running.confs), "ttl": ttl_options}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(REPO, "python"), REPO, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "tests.spark.second_driver", json.dumps(spec)],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    spec = json.loads(sys.argv[1])
    module, function = spec["query"].split(":")
    build = getattr(importlib.import_module(module), function)
    spark = session(confs=spec["confs"], **spec["ttl"])
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", TTLSTATE)
    committed: list[int] = []
    source = spark.readStream.schema(spec["schema"]).option("maxFilesPerTrigger", 1).json(spec["source"])
    query = (build({spec["name"]: source}).writeStream.outputMode(spec["mode"])
             .foreachBatch(lambda df, b: committed.append(b) if df.collect() is not None else None)
             .option("checkpointLocation", spec["checkpoint"]).start())
    done = poll_until(lambda: os.path.exists(os.path.join(spec["checkpoint"], "commits", str(spec["batch"])))
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
