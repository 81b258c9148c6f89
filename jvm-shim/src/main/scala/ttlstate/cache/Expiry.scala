package ttlstate.cache

/** Flink's TtlUtils expiry, the shim's copy (the cross-batch cache applies TTL itself). The
 *  same rule is python/ttlstate/ttl/expiry.py and native/include/ttlstate/ttl_expiry.h; a
 *  property test feeds all three the same generated cases (`main` below answers for Scala). */
object Expiry {
  /** The first instant at which a value last accessed at `ts` is expired, clamped like Flink. */
  def expirationTimestamp(ts: Long, ttl: Long): Long = {
    val ttlWithoutOverflow = if (ts > 0 && Long.MaxValue - ts < ttl) Long.MaxValue - ts else ttl
    ts + ttlWithoutOverflow
  }

  /** Inclusive boundary: expired at the expiration timestamp. */
  def isExpired(ts: Long, ttl: Long, now: Long): Boolean = expirationTimestamp(ts, ttl) <= now

  /** Reads lines "ts ttl now" from stdin, prints 1 (expired) or 0 per line. */
  def main(args: Array[String]): Unit = {
    val in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in))
    val out = new java.io.PrintWriter(new java.io.BufferedWriter(new java.io.OutputStreamWriter(System.out)))
    var line = in.readLine()
    while (line != null) {
      val Array(ts, ttl, now) = line.trim.split(" ").map(_.toLong)
      out.println(if (isExpired(ts, ttl, now)) "1" else "0")
      line = in.readLine()
    }
    out.flush()
  }
}
