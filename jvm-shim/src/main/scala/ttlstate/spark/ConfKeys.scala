package ttlstate.spark

/** Conf keys, mirrored from python/ttlstate/config/keys.py (checked by a test). The shim
 *  reads only what it needs to start the server; the state server validates every key. */
object ConfKeys {
  val PREFIX = "spark.sql.streaming.stateStore.ttlstate."
  val SUFFIXES: Seq[String] = Seq(
    "ttl", "updateType", "stateVisibility", "timeSource", "cleanup.fullSnapshot",
    "cleanup.incremental.size", "cleanup.incremental.perRecord", "cleanup.compactionFilter.enabled",
    "cleanup.compactionFilter.queryTimeAfterNumEntries", "cleanup.compactionFilter.periodicCompaction",
    "cleanup.compactionFilter.compactEvery", "engine", "snapshotInterval", "python", "workers",
    "writeBatchBytes", "keyFilter.maxKeys", "memory.maxBytes", "memory.writeBufferRatio",
    "operator.<operatorId>.ttl")

  val PYTHON: String = PREFIX + "python"
  val WORKERS: String = PREFIX + "workers"
  val WRITE_BATCH_BYTES: String = PREFIX + "writeBatchBytes"
  val DEFAULT_WRITE_BATCH_BYTES = 262144
  val KEY_FILTER_MAX_KEYS: String = PREFIX + "keyFilter.maxKeys"
  val DEFAULT_KEY_FILTER_MAX_KEYS = 1000000
}
