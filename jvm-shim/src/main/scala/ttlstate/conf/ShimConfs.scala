package ttlstate.conf

import scala.util.Try

/** What a provider reads from the ttlstate confs itself. The state server validates every key at
 *  OPEN and fails the query with the message; until then a value that is not one is the default. */
final case class ShimConfs(writeBatchBytes: Int, cacheMaxBytes: Long, clockIntervalMs: Long, keyFilterMaxKeys: Int,
    keyFilterMaxBytes: Long)

object ShimConfs {
  private def int(v: String): Option[Int] = Try(v.trim.toInt).toOption

  /** From the confs under ConfKeys.PREFIX (full keys). `clockIntervalMs` is -1 when off. */
  def of(confs: Map[String, String]): ShimConfs = ShimConfs(
    writeBatchBytes = confs.get(ConfKeys.WRITE_BATCH_SIZE).flatMap(int).filter(_ >= 1024)
      .getOrElse(ConfValues.DEFAULT_WRITE_BATCH_BYTES),
    cacheMaxBytes = confs.get(ConfKeys.CACHE_MAX_BYTES).flatMap(ConfValues.sizeBytes)
      .getOrElse(ConfValues.DEFAULT_CACHE_MAX_BYTES),
    clockIntervalMs = confs.get(ConfKeys.REAL_TIME_CLOCK_INTERVAL).flatMap(ConfValues.durationMs)
      .filter(_ >= ConfKeys.MIN_REAL_TIME_CLOCK_INTERVAL_MS).getOrElse(-1L),
    keyFilterMaxKeys = confs.get(ConfKeys.KEY_FILTER_MAX_KEYS).flatMap(int)
      .getOrElse(ConfValues.DEFAULT_KEY_FILTER_MAX_KEYS),
    keyFilterMaxBytes = confs.get(ConfKeys.KEY_FILTER_MAX_BYTES).flatMap(ConfValues.sizeBytes)
      .getOrElse(ConfValues.DEFAULT_KEY_FILTER_MAX_BYTES))
}
