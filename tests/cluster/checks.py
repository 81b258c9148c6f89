"""Checks the cluster scenarios share: the reference outputs, and what the logs must not say."""

from __future__ import annotations

import re
import sys
from typing import Any

from integration.components import KafkaBroker
from integration.yarn import YarnHadoop

from tests.cluster import workload
from tests.cluster.outputs import outputs
from tests.cluster.submit import TEST_ONLY, jars, job_args, spark_submit
from tests.cluster.workload import Input

Outputs = dict[int, list[tuple[Any, ...]]]


def reference(events: Input, kafka: KafkaBroker, hadoop: YarnHadoop, logdir: str) -> Outputs:
    """Spark's RocksDB provider on the input: from the first YARN scenario, which runs it
    first; a scenario run alone gets it from a local-mode run of the same job."""
    if not events.reference:
        local = ["--master", "local[2]", "--jars", jars(), "--conf", f"spark.pyspark.python={sys.executable}",
                 "--conf", f"spark.pyspark.driver.python={sys.executable}", *TEST_ONLY]
        root = f"{hadoop.fs_url}/reference"
        sub = spark_submit([*local, *job_args(kafka.bootstrap, events.topic, root, ["ref=rocksdb"],
                                              workload.ROWS_PER_BATCH)], logdir, "reference")
        assert sub.wait(600) == 0, sub.tail()
        events.reference = checked_reference(kafka.bootstrap, "ref", events)
    return events.reference


def checked_reference(bootstrap: str, name: str, events: Input) -> Outputs:
    """The run's outputs, checked against the counts computed from the input itself."""
    out = outputs(bootstrap, name)
    assert sorted(out) == list(range(workload.BATCHES)), sorted(out)
    assert workload.final_rows(out) == workload.expected_totals(events.batches)
    return out


def socket_dirs(log_files: list[str]) -> list[str]:
    """The socket directories (/tmp/ttls-*) the executors' state servers used, from their logs."""
    found = []
    for path in log_files:
        with open(path, errors="replace") as f:
            found += re.findall(r"the sockets go to (\S+)", f.read())
    return found


def memory_kills(log_files: list[str]) -> list[str]:
    """Lines where YARN killed a container for its physical memory."""
    hits = []
    for path in log_files:
        with open(path, errors="replace") as f:
            hits += [line.strip() for line in f
                     if "beyond physical memory" in line or "exceeding physical memory" in line]
    return hits
