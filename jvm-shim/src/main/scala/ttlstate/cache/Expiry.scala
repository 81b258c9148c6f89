package ttlstate.cache

/** Flink's TtlUtils expiry, the shim's copy (the cross-batch cache applies TTL itself). The
 *  same rule is python/ttlstate/ttl/expiry.py and native/include/ttlstate/ttl_expiry.h; a
 *  property test feeds all three the same generated cases (ttlstate.tools.ExpiryCases answers
 *  for Scala). */
object Expiry {
  /** The first instant at which a value last accessed at `ts` is expired, clamped like Flink. */
  def expirationTimestamp(ts: Long, ttl: Long): Long = {
    val ttlWithoutOverflow = if (ts > 0 && Long.MaxValue - ts < ttl) Long.MaxValue - ts else ttl
    ts + ttlWithoutOverflow
  }

  /** Inclusive boundary: expired at the expiration timestamp. */
  def isExpired(ts: Long, ttl: Long, now: Long): Boolean = expirationTimestamp(ts, ttl) <= now
}
