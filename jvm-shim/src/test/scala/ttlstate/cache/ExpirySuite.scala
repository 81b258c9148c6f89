package ttlstate.cache

import org.scalatest.funsuite.AnyFunSuite

/** Flink's rule: expired at the expiration timestamp (inclusive), the sum clamped at Long.MaxValue
 *  for positive timestamps only. The same cases run against Python and C++ in
 *  tests/unit/test_cross_language.py. */
class ExpirySuite extends AnyFunSuite {
  private val Max = Long.MaxValue

  test("the boundary is inclusive") {
    assert(Expiry.isExpired(1000, 100, 1100))
    assert(!Expiry.isExpired(1000, 100, 1099))
  }

  test("an expiration past Long.MaxValue is clamped to it") {
    assert(Expiry.expirationTimestamp(Max - 5, 100) == Max)
    assert(Expiry.isExpired(Max - 5, 100, Max))
    assert(!Expiry.isExpired(Max - 5, 100, Max - 1))
  }

  test("negative timestamps are not clamped") {
    assert(Expiry.expirationTimestamp(-5, Max) == Max - 5)
    assert(!Expiry.isExpired(-5, Max, Max - 6))
    assert(Expiry.isExpired(-5, Max, Max - 5))
  }
}
