package ttlstate.spark

/** Conf keys, mirrored from python/ttlstate/config/keys.py (checked by a test). The shim
 *  reads only what it needs to start the server; the state server validates every key. */
object ConfKeys {
  val PREFIX = "spark.sql.streaming.stateStore.ttlstate."
  val SUFFIXES: Seq[String] = Seq(
    "ttl", "updateType", "stateVisibility", "timeSource", "clock.maxGap", "reader.includeExpired",
    "cleanup.fullSnapshot",
    "cleanup.incremental.size", "cleanup.incremental.perRecord", "cleanup.compactionFilter.enabled",
    "cleanup.compactionFilter.queryTimeAfterNumEntries", "cleanup.compactionFilter.periodicCompaction",
    "cleanup.compactionFilter.compactEvery", "engine", "snapshotInterval", "python", "localModePython",
    "workers", "writeBatchBytes", "keyFilter.maxKeys", "keyFilter.maxBytes", "memory.maxBytes", "memory.writeBufferRatio",
    "cache.maxBytes", "requestTimeout", "operator.<operatorId>.ttl", "operator.<operatorName>.ttl",
    "realTime.clockInterval", "prefetch.chunkRows")

  val PYTHON: String = PREFIX + "python"
  val LOCAL_MODE_PYTHON: String = PREFIX + "localModePython"
  val WORKERS: String = PREFIX + "workers"
  val WRITE_BATCH_BYTES: String = PREFIX + "writeBatchBytes"
  val DEFAULT_WRITE_BATCH_BYTES = 262144
  val KEY_FILTER_MAX_KEYS: String = PREFIX + "keyFilter.maxKeys"
  val DEFAULT_KEY_FILTER_MAX_KEYS = 10000000
  val KEY_FILTER_MAX_BYTES: String = PREFIX + "keyFilter.maxBytes"
  val DEFAULT_KEY_FILTER_MAX_BYTES: Long = 128L << 20
  val CACHE_MAX_BYTES: String = PREFIX + "cache.maxBytes"
  val DEFAULT_CACHE_MAX_BYTES: Long = 64L << 20

  private val Size = "(?i)\\s*(\\d+)\\s*(b|k|kb|m|mb|g|gb)?\\s*".r

  /** A size in Spark's binary units ("64m", "1g", bytes); the server validates the same key. */
  def sizeBytes(v: String): Option[Long] = v match {
    case Size(n, unit) =>
      val mult = Option(unit).map(_.toLowerCase.take(1)) match {
        case Some("k") => 1L << 10
        case Some("m") => 1L << 20
        case Some("g") => 1L << 30
        case _ => 1L
      }
      scala.util.Try(math.multiplyExact(n.toLong, mult)).toOption
    case _ => None
  }

  val PREFETCH_CHUNK_ROWS: String = PREFIX + "prefetch.chunkRows"
  val DEFAULT_PREFETCH_CHUNK_ROWS = 0

  val REAL_TIME_CLOCK_INTERVAL: String = PREFIX + "realTime.clockInterval"
  val MIN_REAL_TIME_CLOCK_INTERVAL_MS = 10L // as python/ttlstate/config/store_config.py

  val REQUEST_TIMEOUT: String = PREFIX + "requestTimeout"
  val DEFAULT_REQUEST_TIMEOUT_MS = 300000L
  val MIN_REQUEST_TIMEOUT_MS = 1000L // as python/ttlstate/config/store_config.py

  private val Duration = """(\d+)\s*([a-z]*)""".r
  private val UnitMs = Map("ms" -> 1L, "s" -> 1000L, "sec" -> 1000L, "m" -> 60000L, "min" -> 60000L,
    "h" -> 3600000L, "d" -> 86400000L)

  /** A duration as python/ttlstate/config/parse.py reads it (`30s`, `5m`; a bare number has no
   *  unit and is not one); None if it is not one. The server validates the value at OPEN and
   *  fails the query with the message. */
  def durationMs(value: String): Option[Long] = value.trim.toLowerCase match {
    case Duration(n, unit) if UnitMs.contains(unit) && n.length < 12 => Some(n.toLong * UnitMs(unit))
    case _ => None
  }
}
