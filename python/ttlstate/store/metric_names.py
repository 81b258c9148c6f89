"""Custom metric names reported to Spark, defined once (generated for the shim by ttlstate.codegen).

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
    spark: str = ""  # what a Spark user already reads for the same meaning (docs/metrics.md)
    ui: str = ""  # the shorter description Spark's UI shows, where it is not `desc`


# Named as Spark's own metric: a custom metric of the name of one of the operator's metrics is
# the same SQLMetric (Spark merges the provider's custom metrics into the operator's metric map
# by name, after its own), so what the store reports here adds to Spark's `numRowsRemoved`.
NUM_REMOVED_STATE_ROWS = MetricName("numRemovedStateRows", "sum",
                                    "rows removed from the state: the operator's removals plus "
                                    "ttlExpiredTotal; progress shows the sum as numRowsRemoved",
                                    "Spark's own: `numRowsRemoved` in progress",
                                    ui="number of removed state rows")
TTL_EXPIRED_ON_READ = MetricName("ttlExpiredOnRead", "sum",
                                 "entries hidden or dropped as expired on read",
                                 "none (TTL of transformWithState: `numValuesRemovedDueToTTLExpiry`)")
TTL_REMOVED_BY_FILTER = MetricName("ttlRemovedByCompactionFilter", "sum",
                                   "entries removed by the TTL compaction filter", "none")
TTL_REMOVED_INCREMENTAL = MetricName("ttlRemovedByIncrementalCleanup", "sum",
                                     "entries removed by incremental TTL cleanup", "none")
TTL_DROPPED_FROM_SNAPSHOT = MetricName("ttlDroppedFromSnapshot", "sum",
                                       "expired entries left out of snapshots", "none")
STORE_CALL_COUNT = MetricName("storeCallCount", "sum",
                              "calls of the task to the store that waited for its answer (the store "
                              "runs in the executor's ttlstate state server process)",
                              "none (Spark's RocksDB runs in the executor JVM)",
                              ui="calls of the task to the store that waited for its answer")
STORE_CALL_TIME_MS = MetricName("storeCallTimeMs", "timing",
                                "time the task waited for the store's answers",
                                "close to the sum of `rocksdbGetLatency`, `rocksdbPutLatency` and "
                                "the commit latencies")
BLOOM_FILTER_SKIPPED_READS = MetricName("bloomFilterSkippedReadCount", "sum",
                                        "reads of keys the store does not have, answered by the "
                                        "executor's Bloom filter of the store's keys without a call "
                                        "to the store", "none",
                                        ui="reads of keys the store does not have, answered by the "
                                           "executor's Bloom filter without a call to the store")
ROCKSDB_SST_FILE_SIZE = MetricName("rocksdbSstFileSize", "size",
                                   "bytes of the live SST files on disk (what compaction reclaims; "
                                   "writes still in memtables are not in it)",
                                   "the same name and meaning")
STATE_BYTES = MetricName("stateBytes", "size",
                         "the live state's size in RocksDB: live SST files plus memtables (the state's "
                         "bytes on disk once flushed)", "none")
TTL_EXPIRED_TOTAL = MetricName("ttlExpiredTotal", "sum",
                               "entries that left the state by TTL in this batch, all ways together: "
                               "ttlExpiredOnRead + ttlRemovedByCompactionFilter + "
                               "ttlRemovedByIncrementalCleanup (entries left out of a snapshot are "
                               "not counted: they are still in the state until one of those removes them)",
                               "included in `numRowsRemoved`",
                               ui="entries that left the state by TTL in this batch, all ways together")
COMMIT_TIME_MS = MetricName("storeCommitTimeMs", "timing",
                            "time ttlstate spent committing versions durably (Spark's commitTimeMs "
                            "includes it): the changelog's close and upload, and the batch's apply "
                            "to the local DB when the key count needs it (otherwise the next load "
                            "waits for what is left of the apply)", "part of `commitTimeMs`")
SNAPSHOT_TIME_MS = MetricName("storeSnapshotTimeMs", "timing", "time to write snapshots", "none")
LOAD_LATENCY_MS = MetricName("rocksdbLoadLatencyMs", "timing",
                             "time to load the version: the state server's restore when it rebuilt its "
                             "local DB from the checkpoint, what was left of the last commit's apply "
                             "to the local DB, and filling the Bloom filter",
                             "the same name and meaning")
REPLAYED_CHANGELOGS = MetricName("rocksdbNumReplayChangelogFiles", "sum",
                                 "changelog files replayed to load versions (after the newest "
                                 "snapshot, or on the local state): a restore that replays many "
                                 "is slow, and `snapshotInterval` bounds them",
                                 "the same name and meaning")
SNAPSHOTS_AUTO_REPAIRED = MetricName("numSnapshotsAutoRepaired", "sum",
                                     "loads that passed over a damaged or missing snapshot and "
                                     "rebuilt the version from an older one and the changelogs "
                                     "since (each WARN names the file and why)",
                                     "the same name and meaning (Spark 4.2+; Spark's RocksDB "
                                     "provider: `rocksdbNumSnapshotsAutoRepaired`)")
SST_FILES_READ_IN_PLACE = MetricName("sstFilesReadInPlace", "sum",
                                     "SST files restores opened where they lie in the checkpoint "
                                     "instead of copying them (`snapshot.readInPlace`)",
                                     "none (Spark's RocksDB provider copies every file)")
IN_PLACE_RANGE_READS = MetricName("inPlaceRangeReads", "sum",
                                  "reads of SST files read in place (`snapshot.readInPlace`): "
                                  "those a restore opened (through the shim on HDFS, S3 or another "
                                  "file system it reaches; as links on `file:`) and those evicted "
                                  "from the local disk (`snapshot.localMaxBytes`), each a positional "
                                  "read of the checkpoint's file for blocks RocksDB's block cache "
                                  "did not hold",
                                  "none (Spark's RocksDB provider reads local copies)")
IN_PLACE_RANGE_READ_BYTES = MetricName("inPlaceRangeReadBytes", "size",
                                       "bytes those reads returned (`inPlaceRangeReads`)",
                                       "none")
IN_PLACE_LOCAL_READS = MetricName("inPlaceLocalReads", "sum",
                                  "reads of a store's local SST files, where it reads in place "
                                  "(`snapshot.readInPlace`): against `inPlaceRangeReads`, the local "
                                  "disk's hit rate of the reads RocksDB's block cache missed",
                                  "none")
IN_PLACE_LOCAL_READ_BYTES = MetricName("inPlaceLocalReadBytes", "size",
                                       "bytes those reads returned (`inPlaceLocalReads`)", "none")
LOCAL_SST_FILES_EVICTED = MetricName("localSstFilesEvicted", "sum",
                                     "uploaded SST files read in place from then on and freed on the "
                                     "local disk, to keep it to `snapshot.localMaxBytes`", "none")
LOCAL_SST_BYTES_EVICTED = MetricName("localSstBytesEvicted", "size",
                                     "local disk those files freed (`localSstFilesEvicted`)", "none")
LOCAL_SST_FILES_FILLED = MetricName("localSstFilesFilled", "sum",
                                    "SST files a restore opened in place that were copied to the local "
                                    "disk in the background and are read there from then on "
                                    "(`snapshot.localFill`)", "none")
LOCAL_SST_BYTES_FILLED = MetricName("localSstBytesFilled", "size",
                                    "bytes of those files (`localSstFilesFilled`)", "none")
ENGINE_FALLBACK = MetricName("engineFallback", "sum",
                             "stores running on rocksdict because engine=auto found no native build",
                             "none")

CACHE_HITS = MetricName("executorCacheHitCount", "sum",
                        "reads answered by the executor's cross-batch cache of state entries, without a "
                        "call to the store",
                        "none (not RocksDB's block cache: `rocksdbReadBlockCacheHitCount`)")
CACHE_MISSES = MetricName("executorCacheMissCount", "sum",
                          "reads the executor's cross-batch cache could not answer", "none")
READ_AHEAD_KEYS = MetricName("readAheadKeyCount", "sum",
                             "keys whose state was fetched ahead of Spark's reads, a chunk of input "
                             "rows per round trip (`readAhead.chunkRows`)", "none")
FAMILY_COPY_SCANS = MetricName("familyCopyPrefixScanCount", "sum",
                               "prefix scans of a column family (transformWithState's per-key timers, "
                               "MapState iteration) answered from the task's copy of the family, "
                               "without a call to the store", "none")
# A store with column families (transformWithState's) reports these as Spark's RocksDB provider
# does: numRowsTotal counts its user families' keys only, these its internal families' keys
# (counted by the state server, column_families.is_internal_key) and how many families of each
# kind the provider has created (counted by the shim). Only Spark's RocksDB provider reports
# metrics of these names, on every line (never the operators): no name merges with another.
INTERNAL_FAMILY_KEYS = MetricName("rocksdbNumInternalColFamiliesKeys", "size",
                                  "keys of the store's internal column families (transformWithState's "
                                  "timers, TTL indexes and list metadata), which numRowsTotal leaves out; "
                                  "0 for a store without column families", "the same name and meaning",
                                  ui="number of internal column families' keys")
EXTERNAL_FAMILIES = MetricName("rocksdbNumExternalColumnFamilies", "size",
                               "the store's user column families (transformWithState's state variables) "
                               "its provider has created; 0 for a store without column families",
                               "the same name and meaning on 4.2+ (Spark 4.0 and 4.1 report "
                               "the internal families' count under this name; ttlstate does too there)",
                               ui="number of external column families")
INTERNAL_FAMILIES = MetricName("rocksdbNumInternalColumnFamilies", "size",
                               "the store's internal column families (timers, TTL indexes, list metadata) "
                               "its provider has created; 0 for a store without column families",
                               "the same name and meaning on 4.2+ (Spark 4.0 and 4.1 report "
                               "the user families' count under this name; ttlstate does too there)",
                               ui="number of internal column families")
CACHE_BYTES = MetricName("executorCacheBytes", "size",
                         "bytes the store's entries take in the executor's cross-batch cache", "none")

ALL_METRICS: tuple[MetricName, ...] = (
    TTL_EXPIRED_ON_READ, TTL_REMOVED_BY_FILTER, TTL_REMOVED_INCREMENTAL, TTL_DROPPED_FROM_SNAPSHOT,
    STORE_CALL_COUNT, STORE_CALL_TIME_MS, BLOOM_FILTER_SKIPPED_READS, ROCKSDB_SST_FILE_SIZE,
    COMMIT_TIME_MS, SNAPSHOT_TIME_MS, LOAD_LATENCY_MS, ENGINE_FALLBACK, CACHE_HITS, CACHE_MISSES,
    CACHE_BYTES, STATE_BYTES, TTL_EXPIRED_TOTAL, NUM_REMOVED_STATE_ROWS, READ_AHEAD_KEYS,
    REPLAYED_CHANGELOGS, SNAPSHOTS_AUTO_REPAIRED, FAMILY_COPY_SCANS, INTERNAL_FAMILY_KEYS,
    EXTERNAL_FAMILIES, INTERNAL_FAMILIES, SST_FILES_READ_IN_PLACE, IN_PLACE_RANGE_READS,
    IN_PLACE_RANGE_READ_BYTES, IN_PLACE_LOCAL_READS, IN_PLACE_LOCAL_READ_BYTES, LOCAL_SST_FILES_EVICTED,
    LOCAL_SST_BYTES_EVICTED, LOCAL_SST_FILES_FILLED, LOCAL_SST_BYTES_FILLED,
)

# Former names, for readers of old progress logs and dashboards (docs/metrics.md).
RENAMED: dict[str, str] = {
    "bridgeRoundTrips": STORE_CALL_COUNT.name, "bridgeTimeMs": STORE_CALL_TIME_MS.name,
    "keyFilterSkippedReads": BLOOM_FILTER_SKIPPED_READS.name,
    "rocksdbSstBytes": ROCKSDB_SST_FILE_SIZE.name, "storeLoadTimeMs": LOAD_LATENCY_MS.name,
    "cacheHits": CACHE_HITS.name, "cacheMisses": CACHE_MISSES.name, "cacheBytes": CACHE_BYTES.name,
}
