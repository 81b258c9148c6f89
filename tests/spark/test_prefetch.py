"""The state read-ahead (`prefetch.chunkRows`): a chunk of input rows costs one round trip for
the state of its keys instead of one per cold key, and never changes an answer.

Small chunks make chunk boundaries fall everywhere: between a key's write and its next read in
the same batch, inside runs of duplicates, across a restart. The executor's cache is off, so
the keys of earlier batches are cold and each read of one would need its own round trip."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, run_steps, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
COLD = {K.CACHE_MAX_BYTES.key: "0"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(ttl="1h")
    yield s
    s.stop()


def _steps() -> list[list[dict]]:
    """New keys, keys of earlier batches, and keys repeated within the batch, shuffled."""
    rnd = random.Random(3)
    steps, seen = [], []
    for b in range(5):
        rows = [{"k": f"n{b}-{i}", "v": i} for i in range(30)]
        rows += [{"k": rnd.choice(seen), "v": -1} for _ in range(30)] if seen else []
        rows += rnd.sample(rows, 10)  # duplicates inside the batch, some in the same chunk
        rnd.shuffle(rows)
        seen += [r["k"] for r in rows]
        steps.append(rows)
    return steps


def _custom_sum(run, name: str) -> int:  # noqa: ANN001
    return sum(op["customMetrics"].get(name, 0) for p in run.progress for op in p["stateOperators"])


@pytest.mark.parametrize("workload", ["dropDuplicates", "aggregation"])
def test_prefetch_answers_as_reads_one_by_one_with_fewer_round_trips(spark: SparkSession,
                                                                     workload: str) -> None:
    if workload == "dropDuplicates":
        build, mode = (lambda s: s["events"].dropDuplicates(["k"])), "append"
    else:
        build, mode = (lambda s: s["events"].groupBy("k").count()), "update"
    steps = _steps()
    ahead = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=3, output_mode=mode,
                      confs={**COLD, K.PREFETCH_CHUNK_ROWS.key: "7"})
    one_by_one = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=3, output_mode=mode,
                           confs={**COLD, K.PREFETCH_CHUNK_ROWS.key: "0"})
    theirs = run_steps(spark, ROCKSDB, build, SCHEMA, steps, restart_after=3, output_mode=mode)
    assert ahead.outputs == one_by_one.outputs == theirs.outputs
    assert _custom_sum(one_by_one, "prefetchedKeyCount") == 0
    assert _custom_sum(ahead, "prefetchedKeyCount") > 0
    trips_ahead, trips_one = _custom_sum(ahead, "storeCallCount"), _custom_sum(one_by_one, "storeCallCount")
    assert trips_ahead < trips_one, (trips_ahead, trips_one)
