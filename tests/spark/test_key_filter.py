"""The shim's key filter: a read of a key the store does not have needs no round trip, and
the answers never change (no false negatives, whatever happens to the store between batches)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, run_steps, session, state_rows_per_batch
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def test_growing_filter_has_no_false_negatives_few_false_positives_and_a_bound(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    rnd = random.Random(7)
    # first layer 500 keys, at most 6000
    f = jvm.ttlstate.cache.KeyFilter.withCapacity(1, 1, 1, 500, 6000, "test")
    members = list({rnd.randbytes(rnd.randint(1, 40)) for _ in range(5000)})
    for k in members:
        f.add(bytearray(k))
    assert f.layerCount() >= 4  # 500, 1000, 2000, then 4000: it grew instead of saturating
    assert all(f.mightContain(bytearray(k)) for k in members)
    others = [k for k in (rnd.randbytes(rnd.randint(1, 40)) for _ in range(5000)) if k not in set(members)]
    false_positives = sum(bool(f.mightContain(bytearray(k))) for k in others)
    assert false_positives / len(others) < 0.02, false_positives
    getattr(f, "version_$eq")(5)  # Scala's setter of `var version`
    assert f.matches(1, 1, 1, 5) and not f.matches(1, 1, 2, 5) and not f.matches(1, 1, 1, 4)
    for i in range(1500):  # past maxKeys: it gives up, frees its layers, and everything "might" be there
        f.add(bytearray(b"x%d" % i))
    assert not f.active() and f.memoryBytes() == 0 and not f.matches(1, 1, 1, 5)
    assert all(f.mightContain(bytearray(k)) for k in others[:200] + members[:200])


def test_a_filter_filled_from_the_servers_bits_holds_every_key(spark: SparkSession) -> None:
    """After a restore the shim takes its filter's first layer as the server set it natively
    (`fillFirstLayer`): each key put must then be "might contain", as if added one by one, and
    the bits must be those `add` sets (the same false positives, and the same layer after it)."""
    from ttlstate import _native

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    rnd = random.Random(5)
    keys = list({rnd.randbytes(rnd.randint(0, 60)) for _ in range(3000)})
    f = jvm.ttlstate.cache.KeyFilter.withCapacity(1, 1, 1, 6000, 100_000, "test")
    one_by_one = jvm.ttlstate.cache.KeyFilter.withCapacity(1, 1, 1, 6000, 100_000, "test")
    hashes = _native.KeyHashes()
    for k in keys:
        hashes.add(k)
        one_by_one.add(bytearray(k))
    probes = jvm.ttlstate.cache.KeyFilter.Hashes()
    f.fillFirstLayer(bytearray(hashes.bloom_words(f.firstLayerBitsLog2(), probes)), len(keys))
    assert f.size() == len(keys) and f.layerCount() == 1
    assert all(f.mightContain(bytearray(k)) for k in keys)
    others = [rnd.randbytes(rnd.randint(0, 60)) for _ in range(3000)]
    assert ([bool(f.mightContain(bytearray(k))) for k in others]
            == [bool(one_by_one.mightContain(bytearray(k))) for k in others])
    with pytest.raises(Exception, match="only into a new filter"):
        f.fillFirstLayer(bytearray(hashes.bloom_words(f.firstLayerBitsLog2(), probes)), len(keys))
    f.close()
    one_by_one.close()


def test_a_large_first_batch_keeps_skipping_reads_of_new_keys(spark: SparkSession) -> None:
    """An empty store's filter starts at its minimum size (16k keys); one batch of 70k new keys
    into one partition outgrows it fourfold and must still skip (nearly) every read. (A filter that
    kept its first size would skip about 92% of them, saturating as it fills.)"""
    rows = [{"k": f"first-{i}", "v": i} for i in range(70_000)]
    run = run_steps(spark, TTLSTATE, lambda s: s["events"].dropDuplicates(["k"]), SCHEMA, [rows],
                    confs={"spark.sql.shuffle.partitions": "1"})
    assert len(run.outputs[0]) == len(rows)
    assert state_rows_per_batch(run) == [len(rows)]
    skipped = _custom_sum(run, "bloomFilterSkippedReadCount")
    assert skipped >= 0.98 * len(rows), skipped


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
    skipped = _custom_sum(with_filter, "bloomFilterSkippedReadCount")
    assert _custom_sum(without, "bloomFilterSkippedReadCount") == 0
    new_keys = sum(len(rows) for rows in theirs.outputs.values())
    # Nearly every new key is answered by the filter (a few false positives may still ask).
    assert skipped >= 0.9 * new_keys
    trips_with = _custom_sum(with_filter, "storeCallCount")
    trips_without = _custom_sum(without, "storeCallCount")
    assert trips_with < trips_without, (trips_with, trips_without)
    # the restarted query restored every store from the checkpoint (and filled its filter from
    # the server's hashes): that load is reported
    assert _custom_sum(with_filter, "rocksdbLoadLatencyMs") > 0


def test_after_an_sst_restore_the_filter_lacks_the_restored_keys_for_one_batch_then_skips_again(
        spark: SparkSession) -> None:
    """Restored from an SST snapshot, the server scans the keys in the background: the first
    batch runs with a filter that rules nothing out (every read asks the server), the next
    load merges the scanned keys, and from then on reads of new keys skip the round trip
    again. Outputs as Spark's RocksDB provider's throughout: no key is ever missed."""
    build = lambda s: s["events"].dropDuplicates(["k"])  # noqa: E731
    steps = _dedup_steps() + _dedup_steps()[1:3]  # then batches 1 and 2 again: only restored keys
    confs = {K.SNAPSHOT_INTERVAL.key: "1"}  # every version snapshotted by maintenance (1 s)
    ours = run_steps(spark, TTLSTATE, build, SCHEMA, steps, restart_after=3, confs=confs, pause_s=2.5)
    theirs = run_steps(spark, ROCKSDB, build, SCHEMA, steps, restart_after=3)
    assert ours.outputs == theirs.outputs
    skipped = [sum(op["customMetrics"]["bloomFilterSkippedReadCount"] for op in p["stateOperators"])
               for p in ours.progress]
    loads = [sum(op["customMetrics"]["rocksdbLoadLatencyMs"] for op in p["stateOperators"])
             for p in ours.progress]
    assert loads[3] > 0  # the restore
    assert skipped[3] == 0, skipped  # the restored keys are not in the filter yet
    assert skipped[4] > 0, skipped  # merged at the next load: batch 4's new keys skip again
    assert skipped[5:] == [0, 0], skipped  # every key of the last two is restored: none skipped
