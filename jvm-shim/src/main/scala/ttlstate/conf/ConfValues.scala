package ttlstate.conf

/** The conf values the shim reads itself, parsed as python/ttlstate/config/conf_key.py parses
 *  them, within the bounds the key's generated `ConfKeys.Spec` gives (units, bounds and defaults
 *  all come from Python); None for a value that is not one, which leaves the default until the
 *  server, which validates every key, fails the query at OPEN with the message. */
object ConfValues {
  /** What `number` returns for "off", where the key may be off (no duration, size or int is negative). */
  val Off: Long = -1L

  private val Space = " \t\n\r\f" + 11.toChar
  private val Size = """([0-9]+)[ \t\n\r\f\x0B]*([a-z]*)""".r
  private val Integer = """[+-]?[0-9]+""".r
  private val Term = """([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t\n\r\f\x0B]*([a-z]*)""".r

  private def ascii(value: String): Boolean = value.forall(_ < 128)
  private def strip(s: String): String = s.dropWhile(c => Space.contains(c)).reverse.dropWhile(c => Space.contains(c)).reverse
  private def lower(s: String): String = s.toLowerCase(java.util.Locale.ROOT)

  /** A bool key of `confs` as parse.py's `parse_bool` reads it, its default when not set; any
   *  other value is false here (and fails the OPEN at the server anyway). */
  def flag(key: String, confs: Map[String, String]): Boolean =
    Set("true", "1", "yes", "on").contains(lower(strip(confs.getOrElse(key, ConfKeys.spec(key).default))))

  /** A size in Spark's binary units ("64m", "1g", bytes), at most a Long. */
  def sizeBytes(value: String): Option[Long] =
    if (!ascii(value)) None
    else lower(strip(value)) match {
      case Size(n, unit) if ConfKeys.UNIT_BYTES.contains(unit) =>
        scala.util.Try(java.lang.Math.multiplyExact(n.toLong, ConfKeys.UNIT_BYTES(unit))).toOption
      case _ => None
    }

  /** An ASCII integer (`+5`, `-3`), however large (a Long's range is checked by the bounds). */
  def integer(value: String): Option[BigInt] = strip(value) match {
    case t @ Integer() if ascii(value) => Some(BigInt(t))
    case _ => None
  }

  /** A duration with its unit (`30s`, `1.5h`, `10 seconds`, `interval 1 hour 30 minutes`), in
   *  milliseconds rounded down and clamped to a Long, as parse.py's `parse_duration_ms` reads it
   *  (the grammar is written once per language; the unit table is generated): a bare number has
   *  no unit and is not one, nor is a negative or a calendar unit; zero only `allowZero` (then
   *  also a bare `0`). */
  def durationMs(value: String, allowZero: Boolean = false): Option[Long] = {
    if (!ascii(value)) return None
    var text = lower(strip(value))
    if (text.startsWith("interval") && text.length > 8 && Space.contains(text.charAt(8))) text = strip(text.drop(8))
    if (allowZero && text.matches("""\+?(0+(\.0*)?|\.0+)""")) return Some(0L) // a bare zero
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
    if (terms == 0 || ms.signum < 0 || (ms.signum == 0 && !allowZero)) None
    else Some(ms.min(java.math.BigInteger.valueOf(Long.MaxValue)).longValueExact)
  }

  /** The value of a duration (ms), size (bytes) or int key within its bounds, `Off` for "off"
   *  where the key may be off, None when it is not one. */
  def number(spec: ConfKeys.Spec, value: String): Option[Long] = {
    val (low, high) = spec.bounds.getOrElse(throw new IllegalArgumentException(s"${spec.key} is not a number key"))
    def within(n: BigInt) = if (spec.exclusive) low < n && n < high else low <= n && n <= high
    if (spec.off && ConfKeys.OFF_WORDS.contains(lower(strip(value)))) Some(Off)
    else (spec.kind match {
      case "duration" => durationMs(value, allowZero = low == 0L).map(BigInt(_))
      case "size" => sizeBytes(value).map(BigInt(_))
      case "int" => integer(value)
      case other => throw new IllegalArgumentException(s"${spec.key} is a $other key, not a number the shim reads")
    }).filter(within).map(_.toLong)
  }

  /** The key's default, parsed. */
  def default(key: String): Long = {
    val spec = ConfKeys.spec(key)
    number(spec, spec.default).getOrElse(throw new IllegalStateException(s"$key: default ${spec.default} is not one"))
  }

  /** `key`'s value in `confs` (full keys), or its default when not set or not one. */
  def get(key: String, confs: Map[String, String]): Long =
    confs.get(key).flatMap(number(ConfKeys.spec(key), _)).getOrElse(default(key))

  /** Whether `value` is off, for a key that may be off (its default when not set). */
  def isOff(key: String, value: Option[String]): Boolean =
    ConfKeys.OFF_WORDS.contains(lower(strip(value.getOrElse(ConfKeys.spec(key).default))))

  val DEFAULT_WRITE_BATCH_BYTES: Int = default(ConfKeys.WRITE_BATCH_SIZE).toInt
  val DEFAULT_KEY_FILTER_MAX_KEYS: Int = default(ConfKeys.KEY_FILTER_MAX_KEYS).toInt
  val DEFAULT_KEY_FILTER_MAX_BYTES: Long = default(ConfKeys.KEY_FILTER_MAX_BYTES)
  val DEFAULT_CACHE_MAX_BYTES: Long = default(ConfKeys.CACHE_MAX_BYTES)
  val DEFAULT_REQUEST_TIMEOUT_MS: Long = default(ConfKeys.REQUEST_TIMEOUT)
}
