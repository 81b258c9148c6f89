"""The shim's key filter: a read of a key the store does not have needs no round trip, and
the answers never change (no false negatives, whatever happens to the store between batches)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, run_steps, session
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def test_bloom_filter_has_no_false_negatives_and_few_false_positives(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    rnd = random.Random(7)
    f = jvm.ttlstate.spark.KeyFilter.sized(1, 1, 1, 1000)  # sized for 2 x 1000 keys (min 16384)
    capacity = f.capacity()
    members = {rnd.randbytes(rnd.randint(1, 40)) for _ in range(3000)}
    for k in members:
        f.add(bytearray(k))
    assert all(f.mightContain(bytearray(k)) for k in members)
    others = [k for k in (rnd.randbytes(rnd.randint(1, 40)) for _ in range(5000)) if k not in members]
    false_positives = sum(bool(f.mightContain(bytearray(k))) for k in others)
    assert false_positives / len(others) < 0.02, false_positives
    assert not f.overfull()
    getattr(f, "version_$eq")(5)  # Scala's setter of `var version`
    assert f.matches(1, 1, 1, 5) and not f.matches(1, 1, 2, 5) and not f.matches(1, 1, 1, 4)
    for i in range(capacity - len(members) + 10):  # past its capacity: must be rebuilt
        f.add(bytearray(b"x%d" % i))
    assert f.overfull() and not f.matches(1, 1, 1, 5)


def _dedup_steps() -> list[list[dict]]:
    """Mostly new keys each batch, some repeats within and across batches (and the restart)."""
    rnd = random.Random(11)
    steps, seen = [], []
    for b in range(5):
        rows = [{"k": f"n{b}-{i}", "v": i} for i in range(40)]
        rows += [{"k": rnd.choice(seen), "v": -1} for _ in range(15)] if seen else []
        rows += rows[:5]  # duplicates inside the batch
        seen += [r["k"] for r in rows]
        steps.append(rows)
    return steps


def _custom_sum(run, name: str) -> int:  # noqa: ANN001
    return sum(op["customMetrics"][name] for p in run.progress for op in p["stateOperators"])


def test_absent_keys_skip_the_round_trip_with_identical_outputs(spark: SparkSession) -> None:
    build = lambda s: s["events"].dropDuplicates(["k"])  # noqa: E731
    steps = _dedup_steps()
    with_filter = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=2)
    without = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=2,
                        confs={K.KEY_FILTER_MAX_KEYS.key: "0"})
    theirs = run_steps(spark, ROCKSDB, build, SCHEMA, steps, restart_after=2)
    assert with_filter.outputs == theirs.outputs == without.outputs
    skipped = _custom_sum(with_filter, "keyFilterSkippedReads")
    assert _custom_sum(without, "keyFilterSkippedReads") == 0
    new_keys = sum(len(rows) for rows in theirs.outputs.values())
    # Nearly every new key is answered by the filter (a few false positives may still ask).
    assert skipped >= 0.9 * new_keys
    trips_with = _custom_sum(with_filter, "bridgeRoundTrips")
    trips_without = _custom_sum(without, "bridgeRoundTrips")
    assert trips_with < trips_without, (trips_with, trips_without)
