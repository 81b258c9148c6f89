"""The room an executor's container must leave for the state server, and the setting that leaves it.

On YARN and Kubernetes an executor is a container of fixed size: `spark.executor.memory` (the
JVM heap) + `spark.executor.memoryOverhead` (+ `spark.executor.pyspark.memory` if set), and the
NodeManager (with its physical-memory check on, as EMR and Dataproc run it) or the kubelet kills
the container when the RSS of all its processes exceeds that. The state server runs in the
executor's container, so its memory counts: about `workers` x `memory.maxBytes` (RocksDB's bound
per worker) plus each worker's interpreter, native library and batch buffers. YARN sums the RSS
of the container's processes, so the pages the forked workers share count once per worker.

`spark.executor.memoryOverhead` is the setting that reserves it: Spark defines it as the memory
for "other native overheads" and "non-executor processes running in the same container".
`spark.executor.pyspark.memory` is added to the container too, but PySpark also applies it as an
address-space limit (RLIMIT_AS) to each of its own Python workers, which the state server is not:
raising it for the server would only loosen the UDF workers' limit. So `configure()` sets the
overhead to Spark's own default plus the server's share when it is unset, and warns when it is
set below that.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ttlstate.config import keys as K

OVERHEAD_KEY = "spark.executor.memoryOverhead"
MIB = 1 << 20
# Measured here: an idle worker's RSS is 18 MiB, the supervisor's 9 MiB; a serving worker adds
# Python objects and the batch's buffers (pending writes, the changelog being encoded) to what
# RocksDB keeps within memory.maxBytes, and glibc keeps freed memory in the worker's arena. At
# 50M keys (batches of 500k keys, memory.maxBytes=128m, 2 workers) the server peaked at 384-387
# MB of PSS with snapshots at maintenance and at 413-429 MB with a snapshot started as each
# commit returns (snapshot.afterCommit, beside the next batch): 72 MiB per worker covers both
# (436 MB for those 2 workers); larger batches want more overhead.
WORKER_EXTRA_MIB = 72
SUPERVISOR_MIB = 16
_SPARK_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_SPARK_UNITS = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def spark_mib(value: str) -> int | None:
    """A Spark memory setting in MiB (`1g`, `512m`, `2048`: a bare number is MiB); None if it is
    not one."""
    m = _SPARK_SIZE.match(str(value))
    return int(int(m.group(1)) * _SPARK_UNITS[m.group(2).lower()]) if m else None


def server_mib(workers: int, memory_max_bytes: int) -> int:
    """What YARN counts for a state server with `workers` workers at its RocksDB bound."""
    return workers * (memory_max_bytes // MIB + WORKER_EXTRA_MIB) + SUPERVISOR_MIB


def required_overhead_mib(get: Callable[[str], str | None], ttlstate_confs: dict[str, str]) -> int:
    """Spark's default overhead (`max(memoryOverheadFactor x executor memory, minMemoryOverhead)`)
    plus the state server's share, from the effective Spark confs (`get`) and ttlstate's."""
    executor_mib = spark_mib(get("spark.executor.memory") or "1g") or 1024
    factor = float(get("spark.executor.memoryOverheadFactor") or 0.1)
    minimum = spark_mib(get("spark.executor.minMemoryOverhead") or "384m") or 384
    cores = int(get("spark.executor.cores") or 1)
    workers = int(ttlstate_confs.get(K.WORKERS.key) or 0) or cores
    max_bytes = int(K.MEMORY_MAX_BYTES.parse(ttlstate_confs.get(K.MEMORY_MAX_BYTES.key)
                                             or K.MEMORY_MAX_BYTES.default))
    return max(int(executor_mib * factor), minimum) + server_mib(workers, max_bytes)


def overhead_setting(get: Callable[[str], str | None],
                     ttlstate_confs: dict[str, str]) -> tuple[str | None, str | None]:
    """(the value to set `spark.executor.memoryOverhead` to, or None; a warning, or None)."""
    need = required_overhead_mib(get, ttlstate_confs)
    current = get(OVERHEAD_KEY)
    if current is None or not current.strip():
        return f"{need}m", None
    have = spark_mib(current)
    if have is not None and have < need:
        return None, (f"ttlstate: {OVERHEAD_KEY}={current} leaves the state server no room: YARN and "
                      "Kubernetes count its memory (about workers x memory.maxBytes) in the executor's "
                      f"container and kill a container that exceeds it; set it to at least {need}m "
                      "(Spark's default overhead plus the server's share), or lower "
                      f"{K.MEMORY_MAX_BYTES.key} or {K.WORKERS.key}.")
    return None, None
