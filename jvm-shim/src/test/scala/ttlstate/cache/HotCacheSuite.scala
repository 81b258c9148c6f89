package ttlstate.cache

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/** The executor's cross-batch cache: entries of the current epoch only, bounded in bytes with
 *  the least recently used evicted first, and per owner. The cache is one per JVM: each test
 *  uses its own owners and restores the limit. */
class HotCacheSuite extends AnyFunSuite with BeforeAndAfterEach {
  private def key(s: String) = new KeyBytes().set(s.getBytes("UTF-8"))
  private def value(n: Int) = Array.fill[Byte](n)(1)
  private def put(owner: HotCache.Owner, epoch: Long, entries: (String, Array[Byte])*): Unit = {
    val r = new TaskRecord(1L << 20)
    entries.foreach { case (k, v) => val sk = key(k); assert(r.put(sk, v, 42L, true)) }
    HotCache.putAll(owner, epoch, r)
  }

  override def afterEach(): Unit = HotCache.setLimit(64L << 20)

  test("an entry is returned for its epoch only, and a stale one is dropped") {
    val o = HotCache.newOwner()
    put(o, 1, "a" -> value(10))
    assert(HotCache.get(o, 1, key("a")).ts == 42L)
    assert(HotCache.get(o, 2, key("a")) == null)
    assert(HotCache.get(o, 1, key("a")) == null)
    assert(HotCache.ownerBytes(o) == 0)
  }

  test("owners do not see each other's entries; removeOwner drops all of one") {
    val (o1, o2) = (HotCache.newOwner(), HotCache.newOwner())
    put(o1, 1, "a" -> value(10), "b" -> value(10))
    put(o2, 1, "a" -> value(20))
    assert(HotCache.get(o2, 1, key("a")).value.length == 20)
    HotCache.removeOwner(o1)
    assert(HotCache.get(o1, 1, key("b")) == null)
    assert(HotCache.ownerBytes(o1) == 0)
    assert(HotCache.get(o2, 1, key("a")) != null)
    HotCache.removeOwner(o2)
  }

  test("past the limit the oldest entries go first, but not those in use; the bound is real") {
    val o = HotCache.newOwner()
    val limit = 256L << 10
    HotCache.setLimit(limit)
    val each = HotCache.entryBytes(key("k00000").length, value(100))
    val n = (4 * limit / each).toInt // four times what fits
    (0 until n).foreach { i =>
      put(o, 1, f"k$i%05d" -> value(100))
      if (i % 50 == 0) assert(HotCache.get(o, 1, key("k00000")) != null) // in use throughout
      assert(HotCache.heapBytes <= limit && HotCache.usedBytes <= limit)
    }
    val used = HotCache.usedBytes
    assert(HotCache.ownerBytes(o) == used && used % each == 0)
    assert(used / each > limit / each / 2, s"${used / each} entries of ${limit / each} kept")
    assert(HotCache.get(o, 1, key("k00000")) != null)
    assert(HotCache.get(o, 1, key("k00001")) == null) // the oldest untouched ones are gone
    assert(HotCache.get(o, 1, key(f"k${n - 1}%05d")).value.toSeq == value(100).toSeq) // the newest are there
    HotCache.removeOwner(o)
    assert(HotCache.usedBytes == 0)
  }

  test("an entry written again replaces the old one; a removed one is gone; shrinking evicts") {
    val o = HotCache.newOwner()
    put(o, 1, "a" -> value(10), "b" -> value(10))
    put(o, 2, "a" -> value(30))
    val a = HotCache.get(o, 2, key("a"))
    assert(a.value.length == 30 && a.epoch == 2)
    assert(HotCache.usedBytes == HotCache.entryBytes(key("a").length, value(30)) + HotCache.entryBytes(key("b").length, value(10)))
    HotCache.remove(o, key("b"))
    assert(HotCache.get(o, 1, key("b")) == null)
    HotCache.setLimit(0)
    assert(HotCache.get(o, 2, key("a")) == null && HotCache.usedBytes == 0 && HotCache.heapBytes <= 8L * 1024)
    HotCache.removeOwner(o)
  }

  test("random puts, removes and reads of two owners answer as a map does (no eviction)") {
    val rnd = new scala.util.Random(7)
    val owners = Seq(HotCache.newOwner(), HotCache.newOwner())
    var model = Map.empty[(Int, String), Seq[Byte]]
    (1 to 20000).foreach { n =>
      val o = rnd.nextInt(2)
      val k = s"key${rnd.nextInt(3000)}"
      rnd.nextInt(4) match {
        case 0 =>
          HotCache.remove(owners(o), key(k))
          model -= ((o, k))
        case 1 | 2 =>
          val v = value(rnd.nextInt(40)).map(_ => rnd.nextInt(256).toByte)
          put(owners(o), 1, k -> v)
          model += (o, k) -> v.toSeq
        case _ =>
          assert(Option(HotCache.get(owners(o), 1, key(k))).map(_.value.toSeq) == model.get((o, k)), s"op $n")
      }
    }
    model.foreach { case ((o, k), v) => assert(HotCache.get(owners(o), 1, key(k)).value.toSeq == v) }
    val expected = model.map { case ((_, k), v) => HotCache.entryBytes(key(k).length, v.toArray) }.sum
    assert(HotCache.usedBytes == expected)
    HotCache.removeOwner(owners(0))
    assert(model.filter(_._1._1 == 1).forall { case ((_, k), v) => HotCache.get(owners(1), 1, key(k)).value.toSeq == v })
    assert(model.filter(_._1._1 == 0).forall { case ((_, k), _) => HotCache.get(owners(0), 1, key(k)) == null })
    HotCache.removeOwner(owners(1))
    assert(HotCache.usedBytes == 0)
  }

  test("under eviction, hits that move entries and removes, a read returns the latest value or nothing") {
    // Removals shift the index's entries back using the hash bits kept in each slot: a wrong home
    // would leave an entry unreachable, and a later shift could bring an older copy back.
    val rnd = new scala.util.Random(11)
    HotCache.setLimit(96L << 10)
    val owners = Seq(HotCache.newOwner(), HotCache.newOwner())
    var model = Map.empty[(Int, String), Seq[Byte]]
    var hits = 0
    (1 to 60000).foreach { n =>
      val o = rnd.nextInt(2)
      val k = s"key${rnd.nextInt(4000)}"
      rnd.nextInt(6) match {
        case 0 =>
          HotCache.remove(owners(o), key(k))
          model -= ((o, k))
        case 1 | 2 =>
          val v = value(1 + rnd.nextInt(40)).map(_ => rnd.nextInt(256).toByte)
          put(owners(o), 1, k -> v)
          model += (o, k) -> v.toSeq
        case _ =>
          val got = Option(HotCache.get(owners(o), 1, key(k))).map(_.value.toSeq)
          assert(got.isEmpty || got == model.get((o, k)), s"op $n: $k")
          if (got.nonEmpty) hits += 1
      }
      assert(HotCache.heapBytes <= (96L << 10))
    }
    assert(hits > 2000, s"only $hits hits: the test did not exercise moves")
    val kept = model.count { case ((o, k), v) =>
      val e = HotCache.get(owners(o), 1, key(k))
      assert(e == null || e.value.toSeq == v, k)
      e != null
    }
    assert(kept > 0 && kept < model.size, s"$kept of ${model.size}: eviction not exercised")
    owners.foreach(HotCache.removeOwner)
    assert(HotCache.usedBytes == 0)
  }

  test("a value larger than a quarter of the cache is not kept, nor is an absent one") {
    val o = HotCache.newOwner()
    HotCache.setLimit(4000)
    put(o, 1, "big" -> value(2000), "none" -> null)
    assert(HotCache.get(o, 1, key("big")) == null)
    assert(HotCache.get(o, 1, key("none")) == null)
    HotCache.removeOwner(o)
  }

  test("onlyFound adds the keys a read found and removes the others' older entries") {
    val o = HotCache.newOwner()
    put(o, 1, "old" -> value(10), "kept" -> value(10))
    val r = new TaskRecord(1L << 20)
    Seq("old" -> false, "new" -> false, "kept" -> true).foreach { case (k, found) =>
      val sk = key(k)
      assert(r.put(sk, value(20), 43L, false, found))
    }
    HotCache.putAll(o, 1, r, onlyFound = true)
    assert(HotCache.get(o, 1, key("old")) == null) // written, not found: its old value must not stay
    assert(HotCache.get(o, 1, key("new")) == null)
    assert(HotCache.get(o, 1, key("kept")).value.length == 20)
    HotCache.putAll(o, 1, r)
    assert(HotCache.get(o, 1, key("new")).ts == 43L)
    HotCache.removeOwner(o)
  }

  test("dropRest removes the owner's other entries, and an emptied cache gives its segments back") {
    val (o, other) = (HotCache.newOwner(), HotCache.newOwner())
    put(o, 1, "a" -> value(10), "b" -> value(10))
    put(other, 1, "c" -> value(10))
    val r = new TaskRecord(1L << 20)
    val sk = key("kept")
    assert(r.put(sk, value(20), 43L, false, true))
    HotCache.putAll(o, 1, r, onlyFound = true, dropRest = true)
    assert(HotCache.get(o, 1, key("a")) == null && HotCache.get(o, 1, key("b")) == null)
    assert(HotCache.get(o, 1, key("kept")).value.length == 20)
    assert(HotCache.get(other, 1, key("c")).value.length == 10) // another owner's entries stay
    HotCache.removeOwner(other)
    assert(HotCache.heapBytes > 1024)
    HotCache.putAll(o, 1, new TaskRecord(1L << 20), onlyFound = true, dropRest = true)
    assert(HotCache.usedBytes == 0 && HotCache.heapBytes <= 1024, HotCache.heapBytes) // segments released
    put(o, 1, "again" -> value(10)) // and it still works
    assert(HotCache.get(o, 1, key("again")).value.length == 10)
    HotCache.removeOwner(o)
  }

  test("no segment is humongous for G1 (under half of its smallest region), whatever the limit") {
    val o = HotCache.newOwner()
    HotCache.setLimit(1L << 30)
    (0 until 20000).foreach(i => put(o, 1, f"k$i%05d" -> value(100)))
    assert(HotCache.largestSegmentBytes < (512L << 10))
    HotCache.removeOwner(o)
  }

  test("a view keeps its epoch while it advances by its own commits, and renews it otherwise") {
    val view = new CacheView(HotCache.newOwner())
    view.attach(1, 1, 1, 5, now = 100)
    val e = view.epoch
    view.committed(1, 1, 1, 5, 6)
    view.attach(1, 1, 1, 6, now = 200)
    assert(view.epoch == e && view.describes(6))
    view.attach(1, 1, 1, 6, now = 150) // time went backwards
    assert(view.epoch == e + 1)
    view.attach(1, 1, 2, 6, now = 300) // another lineage
    assert(view.epoch == e + 2)
  }
}
