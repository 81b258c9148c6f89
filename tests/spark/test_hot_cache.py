"""The executor's cross-batch cache (`cache.maxBytes`): exact under TTL, outputs identical with
it on and off and equal to Spark's RocksDB provider, and bounded by its byte limit."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.spark.harness import ROCKSDB, TTLSTATE, Run, batch_times, run_steps, session, state_rows_per_batch
from tests.spark.test_differential import EVENTS, STEPS, agg
from ttlstate.config import keys as K

pytestmark = pytest.mark.spark

OFF = {K.CACHE_MAX_BYTES.key: "0"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session()
    yield s
    s.stop()


def _sum(run: Run, metric: str) -> int:
    return sum(op["customMetrics"].get(metric, 0) for p in run.progress for op in p["stateOperators"])


# Each operator with and without TTL; the other two pairings in `make test-long` only.
@pytest.mark.parametrize(("operator", "ttl"), [
    ("aggregation", "1h"), ("dropDuplicates", "off"),
    pytest.param("aggregation", "off", marks=pytest.mark.long),
    pytest.param("dropDuplicates", "1h", marks=pytest.mark.long)])
def test_same_output_with_the_cache_on_and_off_and_as_rocksdb(spark: SparkSession, operator: str,
                                                               ttl: str) -> None:
    build = agg if operator == "aggregation" else (lambda s: s["events"].dropDuplicates(["k"]))
    mode = "update" if operator == "aggregation" else "append"
    steps = STEPS + STEPS  # keys come back: later batches read what earlier ones wrote
    runs = [run_steps(spark, TTLSTATE, build, {"events": EVENTS}, steps, restart_after=3, output_mode=mode,
                      confs={K.TTL.key: ttl, **extra}) for extra in ({}, OFF)]
    theirs = run_steps(spark, ROCKSDB, build, {"events": EVENTS}, steps, restart_after=3, output_mode=mode)
    on, off = runs
    assert on.outputs == off.outputs == theirs.outputs
    assert state_rows_per_batch(on) == state_rows_per_batch(off) == state_rows_per_batch(theirs)
    assert _sum(on, "executorCacheHitCount") > 0 and _sum(off, "executorCacheHitCount") == 0
    assert _sum(on, "storeCallCount") < _sum(off, "storeCallCount")


def test_an_expired_cached_entry_is_hidden_deleted_and_counted(spark: SparkSession) -> None:
    """Batch 1 reads b from the cache (live); batch 2 finds a and b there, expired: both are
    hidden (so dedup emits them again), deleted by the server and counted as expired on read."""
    ttl_ms = 3000
    run = Run(spark, TTLSTATE, lambda s: s["events"].dropDuplicates(["k"]), {"events": "k STRING, v INT"},
              "append", {K.TTL.key: f"{ttl_ms}ms"})
    run.start()
    try:
        run.step([{"k": "a", "v": 1}, {"k": "b", "v": 1}])
        run.step([{"k": "b", "v": 2}])
        time.sleep(ttl_ms / 1000 + 0.5)
        run.step([{"k": "a", "v": 3}, {"k": "b", "v": 3}])
    finally:
        run.stop()
    t = batch_times(run)
    assert t[1] - t[0] < ttl_ms <= t[2] - t[0], f"batch times {t} do not bracket the TTL"
    assert [len(run.outputs[b]) for b in sorted(run.outputs)] == [2, 0, 2]
    last = run.progress[-1]["stateOperators"][0]["customMetrics"]
    assert run.progress[1]["stateOperators"][0]["customMetrics"]["executorCacheHitCount"] == 1
    assert last["executorCacheHitCount"] == 2
    assert last["ttlExpiredOnRead"] == 2 and last["ttlExpiredTotal"] == 2
    assert run.progress[-1]["stateOperators"][0]["numRowsTotal"] == 2  # deleted, then written again
    assert run.progress[-1]["stateOperators"][0]["numRowsRemoved"] == 2  # Spark's own counter


def test_the_cache_never_exceeds_its_limit(spark: SparkSession) -> None:
    limit = 4096
    steps = [[{"k": f"k{(b * 7 + i) % 60}", "v": i} for i in range(40)] for b in range(4)]
    dedup = lambda s: s["events"].dropDuplicates(["k"])  # noqa: E731
    run = run_steps(spark, TTLSTATE, dedup, {"events": "k STRING, v INT"}, steps,
                    confs={K.CACHE_MAX_BYTES.key: str(limit)})
    sizes = [sum(op["customMetrics"]["executorCacheBytes"] for op in p["stateOperators"])
             for p in run.progress]
    assert max(sizes) <= limit and max(sizes) > 0, sizes
    assert _sum(run, "executorCacheHitCount") > 0


def test_keys_only_written_stay_out_of_the_cache_until_reads_find_keys(spark: SparkSession) -> None:
    """A deduplication of new keys only (reads find nothing, batch after batch) stops adding
    the keys it writes to the cache, where it used to fill it with keys nobody reads back, and
    its tasks' records do not keep them either: a repeat late in the batch reads through the
    server, which has the write. The first batch of a store still adds them (every first batch
    finds nothing; a hot set reads them back next); the second drops them, unread. Once a
    batch's reads find its keys, they are cached again, and the next batch hits them. Output as
    with the cache off and as Spark's RocksDB provider's."""
    new = [[{"k": f"b{b}-{i}", "v": i} for i in range(800 if b == 1 else 400)] for b in range(2)]
    # Four repeats after about 400 reads of each task: still under 1/64 found.
    new[1] += [{"k": f"b1-{i}", "v": -i} for i in (1, 2, 3, 4)]
    again = [[{"k": f"b1-{i}", "v": i} for i in range(400)]] * 2  # batch 1's keys, found twice
    dedup = lambda s: s["events"].dropDuplicates(["k"])  # noqa: E731
    runs = [run_steps(spark, TTLSTATE, dedup, {"events": "k STRING, v INT"}, new + again, confs=extra)
            for extra in ({}, OFF)]
    on, off = runs
    theirs = run_steps(spark, ROCKSDB, dedup, {"events": "k STRING, v INT"}, new + again)
    assert on.outputs == off.outputs == theirs.outputs
    assert sum(len(rows) for rows in on.outputs.values()) == 1200

    def per_batch(metric: str) -> list[int]:
        return [sum(op["customMetrics"][metric] for op in p["stateOperators"]) for p in on.progress]

    sizes, hits = per_batch("executorCacheBytes"), per_batch("executorCacheHitCount")
    assert sizes[0] > 0, sizes  # a store's first batch: its keys are added
    assert sizes[1] == 0, sizes  # hundreds of reads per task, almost none found, twice: dropped
    assert sizes[2] > sizes[1], sizes  # every read found its key: admitted
    assert hits[:3] == [0, 0, 0] and hits[3] == 400, hits  # batch 1's keys were not cached
