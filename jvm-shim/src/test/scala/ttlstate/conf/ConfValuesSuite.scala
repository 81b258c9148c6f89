package ttlstate.conf

import org.scalatest.funsuite.AnyFunSuite

/** The conf values the shim reads itself, parsed as python/ttlstate/config/conf_key.py does, within
 *  the bounds of the keys' generated specs; what is not a value is None (the server then fails the
 *  query with the message). */
class ConfValuesSuite extends AnyFunSuite {
  test("sizes in Spark's binary units, case-insensitive, a bare number being bytes") {
    assert(ConfValues.sizeBytes("64m").contains(64L << 20))
    assert(ConfValues.sizeBytes(" 1G ").contains(1L << 30))
    assert(ConfValues.sizeBytes("2kb").contains(2048L))
    assert(ConfValues.sizeBytes("65536").contains(65536L))
    assert(ConfValues.sizeBytes("10 mb").contains(10L << 20))
  }

  test("what is not a size is None, an overflow too") {
    Seq("", "m", "1.5g", "-1m", "10t", "12 parsecs", "99999999999999999999g", "9999999999999g")
      .foreach(v => assert(ConfValues.sizeBytes(v).isEmpty, v))
  }

  test("durations need their unit") {
    assert(ConfValues.durationMs("30s").contains(30000L))
    assert(ConfValues.durationMs("5m").contains(300000L))
    assert(ConfValues.durationMs("5min").contains(300000L))
    assert(ConfValues.durationMs(" 2D ").contains(2L * 86400000L))
    assert(ConfValues.durationMs("500ms").contains(500L))
    Seq("5", "", "s", "-1s", "0s", "1 month", "5 parsecs", "interval").foreach(v => assert(ConfValues.durationMs(v).isEmpty, v))
  }

  test("durations as Spark writes intervals, fractions and several terms") {
    assert(ConfValues.durationMs("5 seconds").contains(5000L))
    assert(ConfValues.durationMs("10 Minutes").contains(600000L))
    assert(ConfValues.durationMs("1 hour").contains(3600000L))
    assert(ConfValues.durationMs("1.5h").contains(5400000L))
    assert(ConfValues.durationMs("INTERVAL 1 hour 30 minutes").contains(5400000L))
    assert(ConfValues.durationMs("1h30m").contains(5400000L))
    assert(ConfValues.durationMs("2 weeks").contains(14L * 86400000L))
    assert(ConfValues.durationMs("1.0005 seconds").contains(1000L)) // rounded down, as Spark does
    assert(ConfValues.durationMs("99999999999999999999 days").contains(Long.MaxValue))
  }

  test("zero is a duration only where the key allows it, bare or with a unit") {
    Seq("0", "+0", "0.0", ".0", "0s", "interval 0", "0.1ms").foreach(v => assert(ConfValues.durationMs(v, allowZero = true).contains(0L), v))
    Seq("0", "0s", "0.1ms").foreach(v => assert(ConfValues.durationMs(v).isEmpty, v))
    assert(ConfValues.durationMs("-0", allowZero = true).isEmpty)
  }

  test("the defaults are the Python definitions' strings, parsed, within the keys' bounds") {
    assert(ConfValues.DEFAULT_CACHE_MAX_BYTES == ConfValues.sizeBytes(ConfKeys.CACHE_MAX_BYTES_DEFAULT).get)
    assert(ConfValues.DEFAULT_REQUEST_TIMEOUT_MS >= ConfKeys.spec(ConfKeys.REQUEST_TIMEOUT).bounds.get._1)
    assert(ConfValues.DEFAULT_WRITE_BATCH_BYTES > 0 && ConfValues.DEFAULT_KEY_FILTER_MAX_KEYS > 0)
    assert(ConfKeys.CACHE_MAX_BYTES == ConfKeys.PREFIX + "cache.maxBytes")
    assert(ConfValues.default(ConfKeys.REAL_TIME_CLOCK_INTERVAL) == ConfValues.Off)
  }

  test("a key's value within its bounds; off only where the key may be off") {
    val workers = ConfKeys.spec(ConfKeys.WORKERS)
    assert(workers.bounds.contains((0L, 1024L)))
    assert(ConfValues.number(workers, " +7 ").contains(7L) && ConfValues.number(workers, "1024").contains(1024L))
    Seq("-1", "1025", "1_000", "7.0", "off", "99999999999999999999").foreach(v => assert(ConfValues.number(workers, v).isEmpty, v))
    val interval = ConfKeys.spec(ConfKeys.REAL_TIME_CLOCK_INTERVAL)
    Seq("off", " OFF ", "none", "").foreach(v => assert(ConfValues.number(interval, v).contains(ConfValues.Off), v))
    assert(ConfValues.number(interval, "9ms").isEmpty && ConfValues.number(interval, "10ms").contains(10L))
    assert(ConfValues.number(ConfKeys.spec(ConfKeys.REQUEST_TIMEOUT), "off").isEmpty)
    assert(ConfValues.get(ConfKeys.WORKERS, Map(ConfKeys.WORKERS -> "5000")) == 0L) // the default until OPEN fails
  }

  test("a provider's own confs: the values given, else the defaults") {
    val configured = ShimConfs.of(Map(ConfKeys.WRITE_BATCH_SIZE -> " 4096 ", ConfKeys.CACHE_MAX_BYTES -> "0",
      ConfKeys.REAL_TIME_CLOCK_INTERVAL -> "100ms", ConfKeys.KEY_FILTER_MAX_KEYS -> "0",
      ConfKeys.KEY_FILTER_MAX_BYTES -> "1g"))
    assert(configured == ShimConfs(4096, 0L, 100L, 0, 1L << 30))
    val defaults = ShimConfs(ConfValues.DEFAULT_WRITE_BATCH_BYTES, ConfValues.DEFAULT_CACHE_MAX_BYTES, -1L,
      ConfValues.DEFAULT_KEY_FILTER_MAX_KEYS, ConfValues.DEFAULT_KEY_FILTER_MAX_BYTES)
    assert(ShimConfs.of(Map.empty) == defaults)
    // Not values (or outside the keys' bounds): the defaults until the server refuses them.
    assert(ShimConfs.of(Map(ConfKeys.WRITE_BATCH_SIZE -> "512", ConfKeys.CACHE_MAX_BYTES -> "lots",
      ConfKeys.REAL_TIME_CLOCK_INTERVAL -> "5ms", ConfKeys.KEY_FILTER_MAX_KEYS -> "1e6")) == defaults)
    assert(ShimConfs.of(Map(ConfKeys.WRITE_BATCH_SIZE -> "2147483647", ConfKeys.KEY_FILTER_MAX_KEYS -> "-5")) == defaults)
    assert(ShimConfs.of(Map(ConfKeys.REAL_TIME_CLOCK_INTERVAL -> "off")).clockIntervalMs == -1L)
  }
}
