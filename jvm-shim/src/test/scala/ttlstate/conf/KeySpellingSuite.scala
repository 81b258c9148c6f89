package ttlstate.conf

import org.scalatest.funsuite.AnyFunSuite

/** Keys that look like ttlstate's but do not reach it, and the note for TTL off. */
class KeySpellingSuite extends AnyFunSuite {
  private val ttl = ConfKeys.TTL

  test("ttlstate's prefix in another case, or its suffix under another prefix, names the key meant") {
    assert(KeySpelling.meant("spark.sql.streaming.statestore.ttlstate.ttl").contains(ttl))
    assert(KeySpelling.meant("spark.sql.streaming.stateStore.ttlstate.ttl").isEmpty) // ours: not a lookalike
    assert(KeySpelling.meant("spark.ttlstate.ttl").contains(ttl))
    assert(KeySpelling.meant("ttlstate.updatetype").contains(ConfKeys.UPDATE_TYPE))
    assert(KeySpelling.meant("spark.sql.streaming.stateStore.ttl").contains(ttl)) // `ttlstate.` left out
    assert(KeySpelling.meant("spark.sql.streaming.stateStore.ttlState.operator.dedupe.ttl")
      .contains(ConfKeys.PREFIX + "operator.dedupe.ttl"))
    assert(KeySpelling.meant("spark.sql.streaming.stateStore.maintenanceInterval").isEmpty) // Spark's own
    assert(KeySpelling.meant("spark.sql.shuffle.partitions").isEmpty)
    assert(KeySpelling.meant("spark.ttlstate.noSuchKey").isEmpty)
  }

  test("the warning names the key, its value and the right spelling") {
    val m = KeySpelling.lookalikeMessage("spark.sql.streaming.statestore.ttlstate.ttl", "5s").get
    assert(m.contains("'spark.sql.streaming.statestore.ttlstate.ttl' (set to '5s')") && m.contains(s"did you mean '$ttl'?"))
  }

  test("our prefix with a suffix in another case") {
    assert(KeySpelling.inOtherCase(ConfKeys.PREFIX + "TTL").contains(ttl))
    assert(KeySpelling.inOtherCase(ttl).isEmpty)
    assert(KeySpelling.inOtherCase(ConfKeys.PREFIX + "tll").isEmpty)
  }

  test("TTL off: a note naming the key, unless it is on") {
    val note = KeySpelling.ttlOffNote(Map.empty, "/chk").get
    assert(note.contains("TTL is off for this query (checkpoint /chk)") && note.contains(s"$ttl is not set"))
    assert(KeySpelling.ttlOffNote(Map(ttl -> "OFF"), "/chk").get.contains(s"$ttl is 'OFF'"))
    assert(KeySpelling.ttlOffNote(Map(ttl -> "30m"), "/chk").isEmpty)
    val some = KeySpelling.ttlOffNote(Map(ConfKeys.PREFIX + "operator.dedupe.ttl" -> "1h"), "/chk").get
    assert(some.contains("operators without their own TTL (" + ConfKeys.PREFIX + "operator.dedupe.ttl)"))
  }
}
