package ttlstate.cache

import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** The dense task record against a plain map (the model): same answers for every key after
 *  random puts of new keys, updates, absent values and longer values, within its byte bound; a
 *  refused put adds nothing, and a refused update drops the key. */
class TaskRecordSuite extends AnyFunSuite {
  import TaskRecordSuite.Model

  private def kb(key: Array[Byte]): KeyBytes = new KeyBytes().set(key)

  private def bytes(rnd: Random, max: Int): Array[Byte] = Array.fill(rnd.nextInt(max + 1))(rnd.nextInt(256).toByte)

  private def check(r: TaskRecord, model: Map[Seq[Byte], Model], absent: Seq[Array[Byte]]): Unit = {
    model.foreach { case (k, m) =>
      val key = k.toArray
      val i = r.find(kb(key))
      assert(i >= 0, s"key ${k.mkString(",")} lost")
      assert(Option(r.value(i)).map(_.toSeq) == m.value)
      assert(r.hasValue(i) == m.value.isDefined)
      assert(r.ts(i) == m.ts)
      assert(r.inCommitted(i) == m.inCommitted)
      assert(r.key(i).toSeq == k && r.hash(i) == kb(key).hash)
    }
    absent.filterNot(k => model.contains(k.toSeq)).foreach(k => assert(r.find(kb(k)) == -1))
    val live = (0 until r.size).filterNot(r.dropped)
    assert(live.map(i => r.key(i).toSeq).toSet == model.keySet && live.size == model.size)
    assert(r.bytes <= r.limitBytes)
  }

  private def run(seed: Long, limit: Long, ops: Int): (Int, Int) = {
    val rnd = new Random(seed)
    val r = new TaskRecord(limit)
    var model = Map.empty[Seq[Byte], Model]
    val pool = Seq.fill(ops / 3 + 1)(bytes(rnd, 24)).map(_.toSeq).distinct.map(_.toArray)
    var refused, dropped = 0
    (1 to ops).foreach { n =>
      val key = pool(rnd.nextInt(pool.size))
      val value = if (rnd.nextInt(5) == 0) null else bytes(rnd, if (rnd.nextBoolean()) 8 else 64)
      val ts = rnd.nextLong()
      val inCommitted = rnd.nextBoolean()
      val before = model.get(key.toSeq)
      val drops = r.drops
      // the record copies: changing the caller's arrays afterwards must not change it
      val (k, v) = (key.clone(), if (value == null) null else value.clone())
      if (r.put(kb(k), v, ts, inCommitted)) {
        model += key.toSeq -> Model(Option(value).map(_.toSeq), ts, inCommitted || before.exists(_.inCommitted))
        assert(r.drops == drops)
      } else {
        refused += 1
        if (before.isDefined) { dropped += 1; model -= key.toSeq; assert(r.drops == drops + 1) }
      }
      java.util.Arrays.fill(k, 0.toByte)
      if (v != null) java.util.Arrays.fill(v, 0.toByte)
      if (n % 97 == 0 || n == ops) check(r, model, pool.take(20))
    }
    (refused, dropped)
  }

  test("unbounded: the same answers as a map, through growth and updates") {
    Seq(1L, 2L, 3L).foreach(seed => assert(run(seed, 1L << 30, 3000) == ((0, 0))))
  }

  test("bounded: refused puts add nothing, a refused update drops its key, bytes stay within the bound") {
    val (refused, dropped) = run(4L, 40000, 6000)
    assert(refused > 0 && dropped > 0)
    Seq(5L, 6L).foreach(seed => run(seed, 20000, 3000))
  }

  test("an update that fits the value's room is never refused, even at the bound") {
    val r = new TaskRecord(5000)
    val keys = Iterator.from(0).map(i => s"k$i".getBytes("UTF-8"))
    var added = 0
    while (keys.hasNext && { val k = keys.next(); r.put(kb(k), Array.fill(16)(1), 1L, false) }) added += 1
    assert(added > 10)
    val k0 = "k0".getBytes("UTF-8")
    assert(r.put(kb(k0), Array.fill(16)(2), 2L, true))
    assert(r.put(kb(k0), null, 3L, false))
    val i = r.find(kb(k0))
    assert(!r.hasValue(i) && r.ts(i) == 3L && r.inCommitted(i))
    assert(r.put(kb(k0), Array.fill(16)(3), 4L, false))
    assert(r.value(r.find(kb(k0))).toSeq == Seq.fill(16)(3.toByte))
  }

  test("sized from a hint, it holds that many entries without growing; a hint past the bound is ignored") {
    val r = new TaskRecord(1L << 20, 1000, 20000)
    val first = r.bytes
    (0 until 1000).foreach { i => val k = f"key$i%05d".getBytes("UTF-8"); assert(r.put(kb(k), k, i, false)) }
    assert(r.bytes == first && r.dataBytes == 16000)
    assert(new TaskRecord(1L << 16, 1 << 20, 1L << 30).bytes < (1L << 16))
  }

  test("a record given back is reused: emptied, it answers as a new one would, and grows to the hint") {
    // Spares of other suites' tasks may be waiting: take them all first, so the test sees its own.
    val limit = TaskRecord.defaultLimit
    val others = Iterator.continually(TaskRecord.acquire(limit, 0, 0)).take(TaskRecord.spareCount).toList
    val r = TaskRecord.acquire(limit, 0, 0)
    (0 until 3000).foreach { i => val k = s"key$i".getBytes("UTF-8"); r.put(kb(k), k, i, true, true) }
    val grown = r.bytes
    TaskRecord.release(r)
    val again = TaskRecord.acquire(limit, 10, 100)
    assert((again eq r) && again.size == 0 && again.dataBytes == 0 && again.cacheBytes == 0 && again.drops == 0)
    assert(again.bytes == grown) // the arrays were kept
    val k1 = "key1".getBytes("UTF-8")
    assert(again.find(kb(k1)) == -1)
    assert(again.put(kb(k1), null, 7L, false))
    val i = again.find(kb(k1))
    assert(!again.hasValue(i) && again.ts(i) == 7L && !again.inCommitted(i) && !again.found(i))
    TaskRecord.release(again)
    val big = TaskRecord.acquire(limit, 20000, 400000) // a hint past what it holds: it grows once
    assert(big eq r)
    val before = big.bytes
    (0 until 20000).foreach { j => val k = f"k$j%018d".getBytes("UTF-8"); assert(big.put(kb(k), null, j, false)) }
    assert(before > grown && big.bytes == before && big.size == 20000)
    TaskRecord.release(big)
    others.foreach(TaskRecord.release)
  }

  test("a large record its task used little of is not kept for reuse") {
    val limit = TaskRecord.defaultLimit
    val others = Iterator.continually(TaskRecord.acquire(limit, 0, 0)).take(TaskRecord.spareCount).toList
    val large = TaskRecord.acquire(limit, 50000, 2000000)
    assert(large.bytes >= (1L << 20))
    (0 until 100).foreach { j => val k = f"k$j%018d".getBytes("UTF-8"); large.put(kb(k), k, j, false) }
    TaskRecord.release(large)
    assert(TaskRecord.spareCount == 0)
    val full = TaskRecord.acquire(limit, 50000, 2000000)
    assert(!(full eq large))
    (0 until 50000).foreach { j => val k = f"k$j%018d".getBytes("UTF-8"); full.put(kb(k), k, j, false) }
    TaskRecord.release(full)
    assert(TaskRecord.spareCount == 1) // used: kept
    val reused = TaskRecord.acquire(limit, 0, 0)
    assert(reused eq full)
    TaskRecord.release(reused) // emptied by acquire, not refilled: 0 used of its megabytes
    assert(TaskRecord.spareCount == 0)
    others.foreach(TaskRecord.release)
  }

  test("found and inCommitted stay once set, whatever later puts say") {
    val r = new TaskRecord(1L << 20)
    val k = "a".getBytes("UTF-8")
    r.put(kb(k), Array[Byte](1), 1L, inCommitted = false, found = true)
    r.put(kb(k), Array[Byte](2), 2L, inCommitted = true)
    r.put(kb(k), Array[Byte](3), 3L, inCommitted = false)
    val i = r.find(kb(k))
    assert(r.found(i) && r.inCommitted(i) && r.ts(i) == 3L)
  }

  test("cacheBytes counts what the entries would cost the cross-batch cache") {
    val r = new TaskRecord(1L << 20)
    val k = "abc".getBytes("UTF-8")
    r.put(kb(k), new Array[Byte](10), 1L, false)
    assert(r.cacheBytes == HotCache.entryBytes(k.length, new Array[Byte](10)))
  }
}

object TaskRecordSuite {
  private final case class Model(value: Option[Seq[Byte]], ts: Long, inCommitted: Boolean)
}
