"""Session-wide components of the cluster tier, started once for all scenarios: one Kafka broker
(the integration tier's), one Hadoop (HDFS + YARN, two NodeManagers), the packed venv, the input
topic (with room for the reference outputs of Spark's RocksDB provider on it: checks.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from integration.cluster_deps import cluster_deps
from integration.components import KafkaBroker
from integration.kafka_io import create_topic, produce_json
from integration.packed_venv import packed_venv
from integration.yarn import YarnHadoop

from tests.cluster import workload
from tests.cluster.workload import Input

ORDER = ["test_yarn.py", "test_standalone.py", "test_connect.py"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """YARN first: its cluster-mode scenario computes the reference the others compare with,
    and its client-mode one, which stops a NodeManager for good, comes last of the two."""
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return ORDER.index(name) if item.path.parent.name == "cluster" and name in ORDER else -1
    items.sort(key=rank)


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    broker = KafkaBroker(partitions=2)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def hadoop() -> Iterator[YarnHadoop]:
    cluster = YarnHadoop(nodemanagers=2, nm_memory_mb=4096, nm_vcores=2)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def venv() -> str:
    return packed_venv(os.path.join(os.path.dirname(cluster_deps()), "venv"))


@pytest.fixture(scope="session")
def events(kafka: KafkaBroker) -> Input:
    data = workload.batches()
    create_topic(kafka.bootstrap, "events", 1)
    produce_json(kafka.bootstrap, "events", [r for rows in data for r in rows])
    return Input("events", data)
