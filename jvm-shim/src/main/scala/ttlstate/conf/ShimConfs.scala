package ttlstate.conf

/** What a provider reads from the ttlstate confs itself, each within its key's bounds (ConfValues).
 *  The state server validates every key at OPEN and fails the query with the message; until then
 *  a value that is not one is the default. */
final case class ShimConfs(writeBatchBytes: Int, cacheMaxBytes: Long, clockIntervalMs: Long, keyFilterMaxKeys: Int,
    keyFilterMaxBytes: Long)

object ShimConfs {
  /** From the confs under ConfKeys.PREFIX (full keys). `clockIntervalMs` is -1 (ConfValues.Off) when off. */
  def of(confs: Map[String, String]): ShimConfs = ShimConfs(
    writeBatchBytes = ConfValues.get(ConfKeys.WRITE_BATCH_SIZE, confs).toInt,
    cacheMaxBytes = ConfValues.get(ConfKeys.CACHE_MAX_BYTES, confs),
    clockIntervalMs = ConfValues.get(ConfKeys.REAL_TIME_CLOCK_INTERVAL, confs),
    keyFilterMaxKeys = ConfValues.get(ConfKeys.KEY_FILTER_MAX_KEYS, confs).toInt,
    keyFilterMaxBytes = ConfValues.get(ConfKeys.KEY_FILTER_MAX_BYTES, confs))
}
