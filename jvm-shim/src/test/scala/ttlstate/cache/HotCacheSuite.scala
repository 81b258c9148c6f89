package ttlstate.cache

import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

/** The executor's cross-batch cache: entries of the current epoch only, bounded in bytes with
 *  the least recently used evicted first, and per owner. The cache is one per JVM: each test
 *  uses its own owners and restores the limit. */
class HotCacheSuite extends AnyFunSuite with BeforeAndAfterEach {
  private def key(s: String) = new StoreKey(s.getBytes("UTF-8"))
  private def value(n: Int) = Array.fill[Byte](n)(1)
  private def put(owner: HotCache.Owner, epoch: Long, entries: (String, Array[Byte])*): Unit = {
    val r = new TaskRecord(1L << 20)
    entries.foreach { case (k, v) => val sk = key(k); assert(r.put(sk.bytes, sk.hashCode, v, 42L, true)) }
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

  test("past the limit the least recently used entries go first") {
    val o = HotCache.newOwner()
    val each = HotCache.entryBytes(key("k0"), value(100))
    HotCache.setLimit(each * 4)
    put(o, 1, "k0" -> value(100), "k1" -> value(100), "k2" -> value(100), "k3" -> value(100))
    assert(HotCache.get(o, 1, key("k0")) != null) // k0 is now the most recently used
    put(o, 1, "k4" -> value(100))
    assert(HotCache.get(o, 1, key("k1")) == null)
    assert(Seq("k0", "k2", "k3", "k4").forall(k => HotCache.get(o, 1, key(k)) != null))
    assert(HotCache.usedBytes <= each * 4)
    HotCache.removeOwner(o)
  }

  test("a value larger than a quarter of the cache is not kept, nor is an absent one") {
    val o = HotCache.newOwner()
    HotCache.setLimit(4000)
    put(o, 1, "big" -> value(2000), "none" -> null)
    assert(HotCache.get(o, 1, key("big")) == null)
    assert(HotCache.get(o, 1, key("none")) == null)
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
