package ttlstate.spark

import org.apache.spark.sql.execution.streaming.state.{StateStoreCustomMetric, StateStoreCustomSizeMetric, StateStoreCustomSumMetric, StateStoreCustomTimingMetric}

/** Custom metrics, mirrored from python/ttlstate/store/metric_names.py (checked by a test).
 *  Spark declares them from an uninitialised provider, so this is static.
 *
 *  `numRemovedStateRows` is the name of the stateful operator's own metric: Spark merges the
 *  provider's custom metrics into the operator's metric map by name, after its own, so it is the
 *  same SQLMetric and the TTL removals the store reports add to progress's `numRowsRemoved`. */
object Metrics {
  val STORE_CALL_COUNT = "storeCallCount"
  val STORE_CALL_TIME_MS = "storeCallTimeMs"
  val LOAD_LATENCY_MS = "rocksdbLoadLatencyMs"
  val BLOOM_FILTER_SKIPPED_READS = "bloomFilterSkippedReadCount"
  val TTL_EXPIRED_ON_READ = "ttlExpiredOnRead"
  val TTL_EXPIRED_TOTAL = "ttlExpiredTotal"
  val NUM_REMOVED_STATE_ROWS = "numRemovedStateRows"
  val CACHE_HITS = "executorCacheHitCount"
  val CACHE_MISSES = "executorCacheMissCount"
  val CACHE_BYTES = "executorCacheBytes"
  val PREFETCHED_KEYS = "prefetchedKeyCount"

  private val defs: Seq[(String, String, String)] = Seq(
    (TTL_EXPIRED_ON_READ, "sum", "entries hidden or dropped as expired on read"),
    ("ttlRemovedByCompactionFilter", "sum", "entries removed by the TTL compaction filter"),
    ("ttlRemovedByIncrementalCleanup", "sum", "entries removed by incremental TTL cleanup"),
    ("ttlDroppedFromSnapshot", "sum", "expired entries left out of snapshots"),
    (STORE_CALL_COUNT, "sum", "calls of the task to the store that waited for its answer"),
    (STORE_CALL_TIME_MS, "timing", "time the task waited for the store's answers"),
    (BLOOM_FILTER_SKIPPED_READS, "sum",
      "reads of keys the store does not have, answered by the executor's Bloom filter without a call to the store"),
    ("rocksdbSstFileSize", "size",
      "bytes of the live SST files on disk (what compaction reclaims; writes still in memtables are not in it)"),
    ("storeCommitTimeMs", "timing",
      "time ttlstate spent committing versions durably (Spark's commitTimeMs includes it)"),
    ("storeSnapshotTimeMs", "timing", "time to write snapshots"),
    (LOAD_LATENCY_MS, "timing",
      "time to load the version: the state server's restore when it rebuilt its local DB from the checkpoint, and filling the Bloom filter"),
    ("engineFallback", "sum", "stores running on rocksdict because engine=auto found no native build"),
    (CACHE_HITS, "sum", "reads answered by the executor's cross-batch cache of state entries, without a call to the store"),
    (CACHE_MISSES, "sum", "reads the executor's cross-batch cache could not answer"),
    (CACHE_BYTES, "size", "bytes the store's entries take in the executor's cross-batch cache"),
    ("stateBytes", "size",
      "the live state's size in RocksDB: live SST files plus memtables (the state's bytes on disk once flushed)"),
    (TTL_EXPIRED_TOTAL, "sum", "entries that left the state by TTL in this batch, all ways together"),
    (NUM_REMOVED_STATE_ROWS, "sum", "number of removed state rows"),
    (PREFETCHED_KEYS, "sum", "state keys read ahead for a chunk of input rows in one call to the store"))

  val all: Seq[StateStoreCustomMetric] = defs.map {
    case (name, "sum", desc) => StateStoreCustomSumMetric(name, desc)
    case (name, "size", desc) => StateStoreCustomSizeMetric(name, desc)
    case (name, _, desc) => StateStoreCustomTimingMetric(name, desc)
  }
  val byName: Map[String, StateStoreCustomMetric] = all.map(m => m.name -> m).toMap
  def kinds: Seq[(String, String)] = defs.map(d => d._1 -> d._2)
}
