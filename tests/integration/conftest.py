"""Session-wide real components for the integration tier: one Kafka broker and one HDFS
(MiniDFSCluster, two DataNodes, replication 2), started once for all modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from integration.components import KafkaBroker, MiniHdfs


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    broker = KafkaBroker()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def hdfs() -> Iterator[MiniHdfs]:
    cluster = MiniHdfs(datanodes=2, replication=2)
    yield cluster
    cluster.stop()
