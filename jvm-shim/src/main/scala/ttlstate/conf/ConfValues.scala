package ttlstate.conf

/** The few conf values the shim reads itself, parsed as python/ttlstate/config/parse.py parses
 *  them (the units come with the keys, generated from Python); None for a value that is not
 *  one, which leaves the default until the server, which validates every key, fails the query
 *  at OPEN with the message. */
object ConfValues {
  private val Number = """(\d+)\s*([a-z]*)""".r

  /** A size in Spark's binary units ("64m", "1g", bytes). */
  def sizeBytes(value: String): Option[Long] = value.trim.toLowerCase match {
    case Number(n, unit) if ConfKeys.UNIT_BYTES.contains(unit) =>
      scala.util.Try(java.lang.Math.multiplyExact(n.toLong, ConfKeys.UNIT_BYTES(unit))).toOption
    case _ => None
  }

  /** A duration with its unit (`30s`, `5m`; a bare number has no unit and is not one). */
  def durationMs(value: String): Option[Long] = value.trim.toLowerCase match {
    case Number(n, unit) if ConfKeys.UNIT_MS.contains(unit) && n.length < 12 => Some(n.toLong * ConfKeys.UNIT_MS(unit))
    case _ => None
  }

  val DEFAULT_WRITE_BATCH_BYTES: Int = ConfKeys.WRITE_BATCH_SIZE_DEFAULT.toInt
  val DEFAULT_KEY_FILTER_MAX_KEYS: Int = ConfKeys.KEY_FILTER_MAX_KEYS_DEFAULT.toInt
  val DEFAULT_KEY_FILTER_MAX_BYTES: Long = sizeBytes(ConfKeys.KEY_FILTER_MAX_BYTES_DEFAULT).get
  val DEFAULT_CACHE_MAX_BYTES: Long = sizeBytes(ConfKeys.CACHE_MAX_BYTES_DEFAULT).get
  val DEFAULT_REQUEST_TIMEOUT_MS: Long = durationMs(ConfKeys.REQUEST_TIMEOUT_DEFAULT).get
}
