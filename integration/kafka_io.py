"""Kafka from the test process without a Spark session: integration/cluster/KafkaIO.java, one
short JVM per call (kafka-clients only)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from integration.cluster_deps import cluster_deps, java_home


def _kafka_io(*args: str, stdin: str | None = None) -> str:
    deps = cluster_deps()
    cp = os.pathsep.join([os.path.join(deps, "classes"), os.path.join(deps, "kafka-io", "*")])
    done = subprocess.run([os.path.join(java_home(), "bin", "java"), "-Xmx128m", "-cp", cp, "KafkaIO", *args],
                          input=stdin, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"KafkaIO {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    _kafka_io("create", bootstrap, topic, str(partitions))


def produce_json(bootstrap: str, topic: str, rows: list[dict[str, Any]]) -> None:
    """Each row as one JSON record value, in order, into partition 0."""
    _kafka_io("produce", bootstrap, topic, stdin="".join(json.dumps(r) + "\n" for r in rows))


def consume(bootstrap: str, topic: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every record in the topic now."""
    out = []
    for line in _kafka_io("consume", bootstrap, topic).splitlines():
        partition, offset, value = line.split(" ", 2)
        out.append((int(partition), int(offset), value))
    return sorted(out)
