package ttlstate.spark

import org.apache.spark.sql.execution.streaming.state.{StateStoreCustomMetric, StateStoreCustomSizeMetric, StateStoreCustomSumMetric, StateStoreCustomTimingMetric}

/** Custom metrics, mirrored from python/ttlstate/store/metric_names.py (checked by a test).
 *  Spark declares them from an uninitialised provider, so this is static. */
object Metrics {
  val BRIDGE_ROUND_TRIPS = "bridgeRoundTrips"
  val BRIDGE_TIME_MS = "bridgeTimeMs"
  val STORE_LOAD_TIME_MS = "storeLoadTimeMs"
  val KEY_FILTER_SKIPPED_READS = "keyFilterSkippedReads"
  val TTL_EXPIRED_ON_READ = "ttlExpiredOnRead"
  val TTL_EXPIRED_TOTAL = "ttlExpiredTotal"
  val CACHE_HITS = "cacheHits"
  val CACHE_MISSES = "cacheMisses"
  val CACHE_BYTES = "cacheBytes"

  private val defs: Seq[(String, String, String)] = Seq(
    (TTL_EXPIRED_ON_READ, "sum", "entries hidden or dropped as expired on read"),
    ("ttlRemovedByCompactionFilter", "sum", "entries removed by the TTL compaction filter"),
    ("ttlRemovedByIncrementalCleanup", "sum", "entries removed by incremental TTL cleanup"),
    ("ttlDroppedFromSnapshot", "sum", "expired entries left out of snapshots"),
    (BRIDGE_ROUND_TRIPS, "sum", "synchronous round trips between the JVM and the state server"),
    (BRIDGE_TIME_MS, "timing", "time spent waiting on the state server"),
    (KEY_FILTER_SKIPPED_READS, "sum", "reads of absent keys answered by the shim's key filter, without a round trip"),
    ("rocksdbSstBytes", "size",
      "bytes of the live SST files on disk (what compaction reclaims; writes still in memtables are not in it)"),
    ("storeCommitTimeMs", "timing",
      "time ttlstate spent committing versions durably (Spark's commitTimeMs includes it)"),
    ("storeSnapshotTimeMs", "timing", "time to write snapshots"),
    (STORE_LOAD_TIME_MS, "timing",
      "time to load the version: the state server's restore when it rebuilt its local DB from the checkpoint, and filling the shim's key filter"),
    ("engineFallback", "sum", "stores running on rocksdict because engine=auto found no native build"),
    (CACHE_HITS, "sum", "reads answered by the executor's cross-batch cache, without a round trip"),
    (CACHE_MISSES, "sum", "reads the cross-batch cache could not answer"),
    (CACHE_BYTES, "size", "bytes the store's entries take in the executor's cross-batch cache"),
    ("stateBytes", "size",
      "the live state's size in RocksDB: live SST files plus memtables (the state's bytes on disk once flushed)"),
    (TTL_EXPIRED_TOTAL, "sum", "entries that left the state by TTL in this batch, all ways together"))

  val all: Seq[StateStoreCustomMetric] = defs.map {
    case (name, "sum", desc) => StateStoreCustomSumMetric(name, desc)
    case (name, "size", desc) => StateStoreCustomSizeMetric(name, desc)
    case (name, _, desc) => StateStoreCustomTimingMetric(name, desc)
  }
  val byName: Map[String, StateStoreCustomMetric] = all.map(m => m.name -> m).toMap
  def kinds: Seq[(String, String)] = defs.map(d => d._1 -> d._2)
}
