"""Custom metric names reported to Spark, defined once (mirrored in the shim's Metrics.scala).

Spark declares them from `supportedCustomMetrics` on an uninitialised provider; a store
reporting a name missing there fails the task, so both lists are cross-checked by a test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricName:
    name: str
    kind: str  # "sum", "size" or "timing", as Spark's StateStoreCustom*Metric
    desc: str


TTL_EXPIRED_ON_READ = MetricName("ttlExpiredOnRead", "sum",
                                 "entries hidden or dropped as expired on read")
TTL_REMOVED_BY_FILTER = MetricName("ttlRemovedByCompactionFilter", "sum",
                                   "entries removed by the TTL compaction filter")
TTL_REMOVED_INCREMENTAL = MetricName("ttlRemovedByIncrementalCleanup", "sum",
                                     "entries removed by incremental TTL cleanup")
TTL_DROPPED_FROM_SNAPSHOT = MetricName("ttlDroppedFromSnapshot", "sum",
                                       "expired entries left out of snapshots")
BRIDGE_ROUND_TRIPS = MetricName("bridgeRoundTrips", "sum",
                                "synchronous round trips between the JVM and the state server")
BRIDGE_TIME_MS = MetricName("bridgeTimeMs", "timing",
                            "time spent waiting on the state server")
KEY_FILTER_SKIPPED_READS = MetricName("keyFilterSkippedReads", "sum",
                                      "reads of absent keys answered by the shim's key filter, "
                                      "without a round trip")
ROCKSDB_SST_BYTES = MetricName("rocksdbSstBytes", "size",
                               "bytes of the live SST files on disk (what compaction reclaims; "
                               "writes still in memtables are not in it)")
STATE_BYTES = MetricName("stateBytes", "size",
                         "the live state's size in RocksDB: live SST files plus memtables (the state's "
                         "bytes on disk once flushed)")
TTL_EXPIRED_TOTAL = MetricName("ttlExpiredTotal", "sum",
                               "entries that left the state by TTL in this batch, all ways together: "
                               "ttlExpiredOnRead + ttlRemovedByCompactionFilter + "
                               "ttlRemovedByIncrementalCleanup (entries left out of a snapshot are "
                               "not counted: they are still in the state until one of those removes them)")
COMMIT_TIME_MS = MetricName("storeCommitTimeMs", "timing",
                            "time ttlstate spent committing versions durably (Spark's commitTimeMs "
                            "includes it)")
SNAPSHOT_TIME_MS = MetricName("storeSnapshotTimeMs", "timing", "time to write snapshots")
LOAD_TIME_MS = MetricName("storeLoadTimeMs", "timing",
                          "time to load the version: the state server's restore when it rebuilt its "
                          "local DB from the checkpoint, and filling the shim's key filter")
ENGINE_FALLBACK = MetricName("engineFallback", "sum",
                             "stores running on rocksdict because engine=auto found no native build")

CACHE_HITS = MetricName("cacheHits", "sum",
                        "reads answered by the executor's cross-batch cache, without a round trip")
CACHE_MISSES = MetricName("cacheMisses", "sum", "reads the cross-batch cache could not answer")
CACHE_BYTES = MetricName("cacheBytes", "size",
                         "bytes the store's entries take in the executor's cross-batch cache")

ALL_METRICS: tuple[MetricName, ...] = (
    TTL_EXPIRED_ON_READ, TTL_REMOVED_BY_FILTER, TTL_REMOVED_INCREMENTAL, TTL_DROPPED_FROM_SNAPSHOT,
    BRIDGE_ROUND_TRIPS, BRIDGE_TIME_MS, KEY_FILTER_SKIPPED_READS, ROCKSDB_SST_BYTES, COMMIT_TIME_MS,
    SNAPSHOT_TIME_MS, LOAD_TIME_MS, ENGINE_FALLBACK, CACHE_HITS, CACHE_MISSES, CACHE_BYTES, STATE_BYTES,
    TTL_EXPIRED_TOTAL,
)
