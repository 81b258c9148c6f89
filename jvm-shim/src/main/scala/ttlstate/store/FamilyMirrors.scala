package ttlstate.store

import java.nio.ByteBuffer
import java.util.{Arrays, TreeMap}

import scala.jdk.CollectionConverters._

/** Exact copies, in one task's version of a store, of the column families it prefix-scans key
 *  by key.
 *
 *  transformWithState lists a grouping key's timers (and iterates its MapState) with one prefix
 *  scan per key; against the state server each is a round trip, which was nearly all of a served
 *  store's time on the churn benchmark. From the `afterScans`-th prefix scan of one family in a
 *  version, the family's entries are read once, in one chunked scan, and its prefix scans are
 *  answered here. The copy stays exact because every write of the version goes through its task,
 *  and each one is applied to it too (a put, an append, a remove, a family's removal). A family
 *  that would take the copies past `maxBytes` is not copied and is asked of the server for the
 *  rest of the version (dropping a copy is always safe: the server has every write). Only for
 *  stores without ttlstate's TTL (a served transformWithState's), where no entry expires on its
 *  own. Keys and values are kept as stored; a value array is replaced, never changed, so rows
 *  pointing into an answer stay valid. */
final class FamilyMirrors(afterScans: Int, maxBytes: Long) {
  import FamilyMirrors._

  private final class Mirror(val scope: Array[Byte]) {
    val entries = new TreeMap[Array[Byte], Array[Byte]](Unsigned)
  }

  private var mirrors: List[Mirror] = Nil
  // Prefix scans of each family not copied yet (by its scope); Refused: not to be copied.
  private val scans = new java.util.HashMap[ByteBuffer, Integer]()
  private var bytes = 0L

  /** Whether any family is copied (otherwise writes need not be shown to this). */
  def active: Boolean = mirrors.nonEmpty

  def copiedBytes: Long = bytes

  /** Prefix scans answered from a copy (a metric). */
  var answered = 0L

  /** The entries (key, value as stored) starting with `prefix`, in key order, of the family whose
   *  keys start with `scope`, from its copy as it is now; null when the server must answer. */
  def prefixScan(scope: Array[Byte], prefix: Array[Byte]): Iterator[(Array[Byte], Array[Byte])] =
    mirrorOf(scope) match {
      case null => null
      case m =>
        answered += 1
        val upper = upperBound(prefix)
        val range = if (upper == null) m.entries.tailMap(prefix, true) else m.entries.subMap(prefix, true, upper, false)
        range.entrySet().asScala.iterator.map(e => (e.getKey, e.getValue)).toVector.iterator
    }

  /** Counts a prefix scan of the family `scope` that was not answered here: whether to copy the
   *  family now (`load` it). */
  def wants(scope: Array[Byte]): Boolean = {
    val id = ByteBuffer.wrap(scope)
    val n: Int = scans.getOrDefault(id, 0)
    if (n == Refused) false
    else {
      scans.put(id, n + 1)
      n + 1 >= afterScans
    }
  }

  /** Copies the family `scope` from `entries` (all of its entries, as stored, in any order):
   *  whether it did (false: it would pass the budget, and the family is not copied in this
   *  version). Reads `entries` only as far as the budget goes. */
  def load(scope: Array[Byte], entries: Iterator[(Array[Byte], Array[Byte])]): Boolean = {
    val m = new Mirror(scope)
    var size = 0L
    while (entries.hasNext && bytes + size <= maxBytes) {
      val (k, v) = entries.next()
      m.entries.put(k, v)
      size += cost(k, v)
    }
    if (bytes + size > maxBytes) { refuse(scope); false }
    else { mirrors = m :: mirrors; bytes += size; true }
  }

  /** After a put of `value` under the stored key `key`. */
  def put(key: Array[Byte], value: Array[Byte]): Unit = mirrorFor(key) match {
    case null =>
    case m => replace(m, key, value)
  }

  /** After an append of `more` to the stored value of `key` (none: `more` alone). */
  def append(key: Array[Byte], more: Array[Byte]): Unit = mirrorFor(key) match {
    case null =>
    case m =>
      val old = m.entries.get(key)
      replace(m, key, if (old == null) more else { val v = Arrays.copyOf(old, old.length + more.length); System.arraycopy(more, 0, v, old.length, more.length); v })
  }

  /** After the removal of the stored key `key`. */
  def remove(key: Array[Byte]): Unit = mirrorFor(key) match {
    case null =>
    case m =>
      val old = m.entries.remove(key)
      if (old != null) bytes -= cost(key, old)
  }

  /** After the removal of every key starting with `prefix` (a column family's). */
  def removePrefix(prefix: Array[Byte]): Unit = mirrors.foreach { m =>
    if (startsWith(m.scope, prefix)) { m.entries.asScala.foreach { case (k, v) => bytes -= cost(k, v) }; m.entries.clear() }
    else if (startsWith(prefix, m.scope)) {
      val upper = upperBound(prefix)
      val range = if (upper == null) m.entries.tailMap(prefix, true) else m.entries.subMap(prefix, true, upper, false)
      range.asScala.foreach { case (k, v) => bytes -= cost(k, v) }
      range.clear()
    }
  }

  private def replace(m: Mirror, key: Array[Byte], value: Array[Byte]): Unit = {
    val old = m.entries.put(key, value)
    bytes += cost(key, value) - (if (old == null) 0L else cost(key, old))
    if (bytes > maxBytes) { // grown past the budget: the server answers this family from now on
      m.entries.asScala.foreach { case (k, v) => bytes -= cost(k, v) }
      mirrors = mirrors.filterNot(_ eq m)
      refuse(m.scope)
    }
  }

  private def refuse(scope: Array[Byte]): Unit = scans.put(ByteBuffer.wrap(scope), Refused)

  private def mirrorOf(scope: Array[Byte]): Mirror = mirrors.find(m => Arrays.equals(m.scope, scope)).orNull

  private def mirrorFor(key: Array[Byte]): Mirror = mirrors.find(m => startsWith(key, m.scope)).orNull
}

object FamilyMirrors {
  private val Refused = -1
  // What one entry of a copy costs besides its bytes (the map's node, two array headers, a tuple).
  private val EntryOverhead = 96L

  private val Unsigned: java.util.Comparator[Array[Byte]] = (a, b) => Arrays.compareUnsigned(a, b)

  private def cost(k: Array[Byte], v: Array[Byte]): Long = k.length + v.length + EntryOverhead

  private def startsWith(key: Array[Byte], prefix: Array[Byte]): Boolean =
    key.length >= prefix.length && Arrays.equals(key, 0, prefix.length, prefix, 0, prefix.length)

  /** The least key above every key starting with `prefix` (null: none, the prefix is all 0xff). */
  private[store] def upperBound(prefix: Array[Byte]): Array[Byte] = {
    var n = prefix.length
    while (n > 0 && prefix(n - 1) == 0xff.toByte) n -= 1
    if (n == 0) null
    else { val out = Arrays.copyOf(prefix, n); out(n - 1) = (out(n - 1) + 1).toByte; out }
  }
}
