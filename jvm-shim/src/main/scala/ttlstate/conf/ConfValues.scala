package ttlstate.conf

/** The few conf values the shim reads itself, parsed as python/ttlstate/config/parse.py parses
 *  them (the units come with the keys, generated from Python); None for a value that is not
 *  one, which leaves the default until the server, which validates every key, fails the query
 *  at OPEN with the message. */
object ConfValues {
  private val Number = """(\d+)\s*([a-z]*)""".r  // a size

  /** A size in Spark's binary units ("64m", "1g", bytes). */
  def sizeBytes(value: String): Option[Long] = value.trim.toLowerCase match {
    case Number(n, unit) if ConfKeys.UNIT_BYTES.contains(unit) =>
      scala.util.Try(java.lang.Math.multiplyExact(n.toLong, ConfKeys.UNIT_BYTES(unit))).toOption
    case _ => None
  }

  private val Space = " \t\n\r\f" + 11.toChar
  private val Term = """([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t\n\r\f\x0B]*([a-z]*)""".r

  /** A duration with its unit (`30s`, `1.5h`, `10 seconds`, `interval 1 hour 30 minutes`), in
   *  milliseconds rounded down and clamped to a Long, as parse.py's `parse_duration_ms` reads it
   *  (the grammar is written once per language; the unit table is generated): a bare number has
   *  no unit and is not one, nor is zero, a negative or a calendar unit. */
  def durationMs(value: String): Option[Long] = {
    if (!value.forall(_ < 128)) return None
    var text = strip(value).toLowerCase(java.util.Locale.ROOT)
    if (text.startsWith("interval") && text.length > 8 && Space.contains(text.charAt(8))) text = strip(text.drop(8))
    var pos = 0
    var total = java.math.BigDecimal.ZERO // exact, as Python's Fraction
    var terms = 0
    while (pos < text.length) {
      val m = Term.findPrefixMatchOf(text.substring(pos)).getOrElse(return None)
      val (sign, number, unit) = (m.group(1), m.group(2), m.group(3))
      if (sign == "-" || !ConfKeys.UNIT_US.contains(unit)) return None
      val n = new java.math.BigDecimal(if (number.startsWith(".")) "0" + number else number.stripSuffix("."))
      total = total.add(n.multiply(java.math.BigDecimal.valueOf(ConfKeys.UNIT_US(unit))))
      terms += 1
      pos += m.end
      while (pos < text.length && Space.contains(text.charAt(pos))) pos += 1
    }
    val ms = total.movePointLeft(3).setScale(0, java.math.RoundingMode.FLOOR).toBigInteger
    if (terms == 0 || ms.signum <= 0) None
    else Some(ms.min(java.math.BigInteger.valueOf(Long.MaxValue)).longValueExact)
  }

  private def strip(s: String): String = s.dropWhile(c => Space.contains(c)).reverse.dropWhile(c => Space.contains(c)).reverse

  val DEFAULT_WRITE_BATCH_BYTES: Int = ConfKeys.WRITE_BATCH_SIZE_DEFAULT.toInt
  val DEFAULT_KEY_FILTER_MAX_KEYS: Int = ConfKeys.KEY_FILTER_MAX_KEYS_DEFAULT.toInt
  val DEFAULT_KEY_FILTER_MAX_BYTES: Long = sizeBytes(ConfKeys.KEY_FILTER_MAX_BYTES_DEFAULT).get
  val DEFAULT_CACHE_MAX_BYTES: Long = sizeBytes(ConfKeys.CACHE_MAX_BYTES_DEFAULT).get
  val DEFAULT_REQUEST_TIMEOUT_MS: Long = durationMs(ConfKeys.REQUEST_TIMEOUT_DEFAULT).get
}
