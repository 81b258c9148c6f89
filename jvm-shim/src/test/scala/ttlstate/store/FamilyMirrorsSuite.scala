package ttlstate.store

import java.util.{Arrays, TreeMap}

import scala.jdk.CollectionConverters._
import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** A family's copy answers prefix scans exactly as the store would after any sequence of the
 *  task's writes (checked against a model of the store), is made only at the `afterScans`-th
 *  scan, and is not made, or is dropped, past its budget. */
class FamilyMirrorsSuite extends AnyFunSuite {
  private val unsigned: java.util.Comparator[Array[Byte]] = (a, b) => Arrays.compareUnsigned(a, b)
  private val families = Vector(Array[Byte](0, 1, 'a'), Array[Byte](0, 1, 'b'))

  private def key(family: Int, group: Int, tail: Int): Array[Byte] =
    families(family) ++ Array(group.toByte, (if (group % 3 == 0) 0xff else group).toByte, tail.toByte)

  private def prefix(family: Int, group: Int): Array[Byte] = key(family, group, 0).dropRight(1)

  /** The model's entries of `family` starting with `p`, in key order. */
  private def modelScan(model: TreeMap[Array[Byte], Array[Byte]], p: Array[Byte]): Seq[(Seq[Byte], Seq[Byte])] =
    model.asScala.toSeq.filter { case (k, _) => k.startsWith(p) }.map { case (k, v) => (k.toSeq, v.toSeq) }

  test("prefix scans from the copy match the store after random puts, appends, removes and family removals") {
    val rnd = new Random(7)
    for (round <- 0 until 50) {
      val model = new TreeMap[Array[Byte], Array[Byte]](unsigned)
      val mirrors = new FamilyMirrors(afterScans = 3, maxBytes = 1L << 20)
      var answered = 0
      for (_ <- 0 until 400) {
        val (f, g, t) = (rnd.nextInt(2), rnd.nextInt(8), rnd.nextInt(4))
        val k = key(f, g, t)
        rnd.nextInt(10) match {
          case 0 | 1 | 2 =>
            val v = Array.fill(rnd.nextInt(5))(rnd.nextInt(256).toByte)
            model.put(k, v); mirrors.put(k.clone, v)
          case 3 =>
            val more = Array.fill(1 + rnd.nextInt(3))(rnd.nextInt(256).toByte)
            val old = model.get(k)
            model.put(k, if (old == null) more else old ++ more); mirrors.append(k.clone, more)
          case 4 | 5 => model.remove(k); mirrors.remove(k.clone)
          case 6 if rnd.nextInt(10) == 0 =>
            model.keySet().removeIf(_.startsWith(families(f))); mirrors.removePrefix(families(f))
          case _ =>
            val p = prefix(f, g)
            var local = mirrors.prefixScan(families(f), p)
            if (local == null && mirrors.wants(families(f))) {
              // the load sees the store as it is, in any order
              assert(mirrors.load(families(f), rnd.shuffle(model.asScala.toSeq.filter(_._1.startsWith(families(f)))).iterator))
              local = mirrors.prefixScan(families(f), p)
            }
            if (local != null) {
              answered += 1
              assert(local.map { case (k2, v) => (k2.toSeq, v.toSeq) }.toSeq == modelScan(model, p), s"round $round")
            }
        }
      }
      assert(answered > 0)
      val copied = families.filter(f => mirrors.prefixScan(f, f) != null)
      assert(mirrors.copiedBytes ==
        model.asScala.collect { case (k, v) if copied.exists(k.startsWith(_)) => k.length + v.length + 96L }.sum)
    }
  }

  test("a copy is made at the family's afterScans-th scan, not before, and answers as of its call") {
    val mirrors = new FamilyMirrors(afterScans = 3, maxBytes = 1L << 20)
    val f = families(0)
    assert(!mirrors.wants(f) && !mirrors.wants(f) && !mirrors.wants(families(1)))
    assert(mirrors.wants(f))
    assert(mirrors.load(f, Iterator(key(0, 1, 1) -> Array[Byte](1))))
    val before = mirrors.prefixScan(f, prefix(0, 1))
    mirrors.put(key(0, 1, 2), Array[Byte](2))
    assert(before.map(_._1.toSeq).toSeq == Seq(key(0, 1, 1).toSeq))
    assert(mirrors.prefixScan(f, prefix(0, 1)).size == 2)
    assert(mirrors.prefixScan(families(1), prefix(1, 1)) == null)
  }

  test("a family past the budget is not copied, and a copy that grows past it is dropped") {
    val small = new FamilyMirrors(afterScans = 1, maxBytes = 300)
    val f = families(0)
    assert(small.wants(f))
    assert(!small.load(f, Iterator.tabulate(4)(i => key(0, i, 0) -> Array[Byte](1))))
    assert(!small.wants(f) && small.prefixScan(f, prefix(0, 1)) == null && small.copiedBytes == 0)

    assert(small.wants(families(1)) && small.load(families(1), Iterator(key(1, 1, 0) -> Array[Byte](1))))
    assert(small.active)
    (1 to 3).foreach(t => small.put(key(1, 1, t), Array[Byte](1)))
    assert(!small.active && small.prefixScan(families(1), prefix(1, 1)) == null && small.copiedBytes == 0)
    assert(!small.wants(families(1)))
  }

  test("upperBound: the least key above a prefix's keys") {
    assert(FamilyMirrors.upperBound(Array[Byte](1, 2)).toSeq == Seq[Byte](1, 3))
    assert(FamilyMirrors.upperBound(Array[Byte](1, 0xff.toByte)).toSeq == Seq[Byte](2))
    assert(FamilyMirrors.upperBound(Array[Byte](0xff.toByte)) == null)
  }
}
