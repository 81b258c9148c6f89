"""Bounded memory across stores: Spark's default 200 shuffle partitions on `local[2]`.

A dropDuplicates (and a count per key, so two stateful operators: 400 stores) on 200
partitions, `batches` batches of `keys_per_batch` new keys. While it runs, the state
server's processes are sampled: resident memory (supervisor + workers), open file
descriptors and threads per worker. Run once per `memory.maxBytes` value given; each run
is its own fresh JVM and server. What it shows: RocksDB memory is bounded by the budget
(one block cache and write-buffer manager per worker), and descriptors stay bounded
(`max_open_files` per DB, no info LOG files) however many stores a worker holds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from benchmarks.harness.machine import describe
from benchmarks.harness.output import save
from benchmarks.harness.subproc import SERVER_MARKERS
from ttlstate.server.worker_processes import WORKER_NAME

CHILD = r"""
import json, os, sys
from pyspark.sql import SparkSession, functions as F
import ttlstate
p = json.loads(sys.argv[1])
spark = ttlstate.configure(
    SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", str(p["partitions"]))
    .config("spark.sql.streaming.stateStore.maintenanceInterval", "5s"),
    ttl="1h", memory_max_bytes=p["memory"]).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
src = spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1).json(p["input"])
dedup = src.dropDuplicates(["key"]).groupBy("key").count()
q = (dedup.writeStream.format("noop").outputMode("update")
     .option("checkpointLocation", p["checkpoint"]).trigger(availableNow=True).start())
q.awaitTermination()
print(json.dumps([{"batch": x["batchId"], "ms": x["durationMs"]["triggerExecution"],
                   "rows": [o["numRowsTotal"] for o in x["stateOperators"]]} for x in q.recentProgress]))
spark.stop()
"""


def _server_processes(root_pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [k for k in kids if any(m in " ".join(_cmdline(k)) for m in SERVER_MARKERS)]


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _sample(root_pid: int, peaks: dict[str, float], stop: threading.Event) -> None:
    while not stop.is_set():
        procs = _server_processes(root_pid)
        workers = [p for p in procs if _name(p) == WORKER_NAME]
        try:
            rss = sum(p.memory_info().rss for p in procs)
            fds = max((p.num_fds() for p in workers), default=0)
            threads = max((p.num_threads() for p in workers), default=0)
            worker_rss = max((p.memory_info().rss for p in workers), default=0)
        except psutil.Error:
            continue
        peaks["server_rss_mb"] = max(peaks.get("server_rss_mb", 0), rss / 2**20)
        peaks["worker_rss_mb"] = max(peaks.get("worker_rss_mb", 0), worker_rss / 2**20)
        peaks["worker_fds"] = max(peaks.get("worker_fds", 0), fds)
        peaks["worker_threads"] = max(peaks.get("worker_threads", 0), threads)
        stop.wait(0.2)


def run_one(memory: str, partitions: int, batches: int, keys_per_batch: int, work: str) -> dict[str, object]:
    params = {"memory": memory, "partitions": partitions, "input": os.path.join(work, "input"),
              "checkpoint": tempfile.mkdtemp(prefix="ck-", dir=work)}
    peaks: dict[str, float] = {}
    stop = threading.Event()
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(params)], stdout=subprocess.PIPE,
                             text=True)
    sampler = threading.Thread(target=_sample, args=(child.pid, peaks, stop), daemon=True)
    sampler.start()
    out, _ = child.communicate()
    stop.set()
    sampler.join()
    if child.returncode != 0:
        raise RuntimeError(f"the query failed (exit {child.returncode})")
    progress = json.loads(out.strip().splitlines()[-1])
    return {"memory_max_bytes": memory, "partitions": partitions, "stores": 2 * partitions,
            "batches": batches, "keys": batches * keys_per_batch,
            "seconds": round(time.perf_counter() - started, 1),
            **{k: round(v, 1) for k, v in peaks.items()}, "progress": progress}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--keys-per-batch", type=int, default=250_000)
    ap.add_argument("--memory", default="64m,256m", help="memory.maxBytes values, one run each")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="ttlstate-many-stores-")
    os.makedirs(os.path.join(work, "input"))
    for b in range(args.batches):
        with open(os.path.join(work, "input", f"part-{b:03d}.json"), "w") as f:
            f.writelines(f'{{"key":"b{b}-k{i}"}}\n' for i in range(args.keys_per_batch))
    results: list[dict[str, object]] = [{"machine": describe()}]
    for memory in args.memory.split(","):
        r = run_one(memory, args.partitions, args.batches, args.keys_per_batch, work)
        print({k: v for k, v in r.items() if k != "progress"}, flush=True)
        results.append(r)
    return save(results, args.json)


if __name__ == "__main__":
    main()
