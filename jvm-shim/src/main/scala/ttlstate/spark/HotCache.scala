package ttlstate.spark

import java.nio.ByteBuffer
import java.util.concurrent.atomic.AtomicLong

/** The executor's cache of recently used state entries, kept across batches: encoded key ->
 *  (last-access timestamp, value bytes) per store, so a read of a hot key needs no round trip to
 *  the state server. One per JVM, shared by all stores, bounded in bytes (`cache.maxBytes`),
 *  evicting the least recently used entry first (a LinkedHashMap in access order).
 *
 *  An entry is only ever what the store's committed state holds: each store tags its entries
 *  with an epoch that it renews whenever the server's local DB may have changed by anything but
 *  this provider's own commits (see `CacheView`), which makes all older entries misses. */
object HotCache {
  /** What a key maps to: the value and its last-access time at the tagged version. */
  final class Entry(val epoch: Long, val ts: Long, val value: Array[Byte]) {
    def size(key: Array[Byte]): Long = key.length + value.length + Overhead
  }

  private final class Key(val owner: Long, val key: ByteBuffer) {
    override def hashCode: Int = key.hashCode * 31 + java.lang.Long.hashCode(owner)
    override def equals(o: Any): Boolean = o match {
      case k: Key => k.owner == owner && k.key == key
      case _ => false
    }
  }

  /** Bytes per entry besides key and value: map node, key wrapper, entry object, array headers. */
  val Overhead = 160L

  private val map = new java.util.LinkedHashMap[Key, Entry](1 << 12, 0.75f, true)
  private val bytesByOwner = new java.util.HashMap[java.lang.Long, java.lang.Long]()
  private var bytes = 0L
  @volatile private var limit = ConfKeys.DEFAULT_CACHE_MAX_BYTES
  private val owners = new AtomicLong(0)

  /** A new owner id, one per provider instance. */
  def newOwner(): Long = owners.incrementAndGet()

  /** The executor-wide bound; the most recent value applies (all stores of an application see
   *  the same conf). Shrinking evicts at once. */
  def setLimit(maxBytes: Long): Unit = synchronized {
    limit = maxBytes
    evict()
  }

  def enabled: Boolean = limit > 0

  def usedBytes: Long = synchronized(bytes)

  def ownerBytes(owner: Long): Long = synchronized {
    val b = bytesByOwner.get(owner)
    if (b == null) 0L else b.longValue
  }

  /** The entry of `key` for `owner`, if it belongs to `epoch`; a stale one is dropped. */
  def get(owner: Long, epoch: Long, key: Array[Byte]): Entry = synchronized {
    val k = new Key(owner, ByteBuffer.wrap(key))
    val e = map.get(k)
    if (e == null) null
    else if (e.epoch == epoch) e
    else { drop(k, key, e); null }
  }

  /** Remembers `key`'s committed state (copies the key: callers reuse their buffers). */
  def put(owner: Long, epoch: Long, key: Array[Byte], ts: Long, value: Array[Byte]): Unit = synchronized {
    if (limit <= 0) return
    val e = new Entry(epoch, ts, value)
    if (e.size(key) > limit / 4) { remove(owner, key); return } // one huge value must not flush the rest
    val copy = java.util.Arrays.copyOf(key, key.length)
    val k = new Key(owner, ByteBuffer.wrap(copy))
    val old = map.put(k, e)
    if (old != null) account(owner, -old.size(copy))
    account(owner, e.size(copy))
    evict()
  }

  def remove(owner: Long, key: Array[Byte]): Unit = synchronized {
    val k = new Key(owner, ByteBuffer.wrap(key))
    val old = map.get(k)
    if (old != null) drop(k, key, old)
  }

  /** Drops every entry of `owner` (a provider closing). */
  def removeOwner(owner: Long): Unit = synchronized {
    val it = map.entrySet.iterator
    while (it.hasNext) {
      val e = it.next()
      if (e.getKey.owner == owner) {
        account(owner, -e.getValue.size(e.getKey.key.array))
        it.remove()
      }
    }
  }

  private def drop(k: Key, key: Array[Byte], e: Entry): Unit = {
    map.remove(k)
    account(k.owner, -e.size(key))
  }

  private def account(owner: Long, delta: Long): Unit = {
    bytes += delta
    val now = ownerBytes0(owner) + delta
    if (now <= 0) bytesByOwner.remove(owner) else bytesByOwner.put(owner, now)
  }

  private def ownerBytes0(owner: Long): Long = {
    val b = bytesByOwner.get(owner)
    if (b == null) 0L else b.longValue
  }

  private def evict(): Unit = {
    val it = map.entrySet.iterator
    while (bytes > limit && it.hasNext) {
      val e = it.next()
      account(e.getKey.owner, -e.getValue.size(e.getKey.key.array))
      it.remove()
    }
  }
}

/** One provider's use of the cache: which committed version its entries describe (`version`),
 *  for which server lineage, under which epoch. Like the key filter, it is valid only while the
 *  server's local DB advanced by this provider's own commits; anything else renews the epoch. */
final class CacheView(val owner: Long) {
  @volatile var epoch: Long = 0L
  @volatile private var tag: (Long, Int, Long, Long) = (-1L, -1, -1L, -1L) // generation, handle, lineage, version
  @volatile private var maxNow: Long = Long.MinValue

  /** Makes the view describe `version` of this lineage at time `now`: kept if it already does
   *  (and time did not go backwards, which could revive entries the server already removed as
   *  expired), renewed (all entries become misses) otherwise. */
  def attach(generation: Long, handle: Int, lineage: Long, version: Long, now: Long): Unit = synchronized {
    if (tag != ((generation, handle, lineage, version)) || now < maxNow) epoch += 1
    tag = (generation, handle, lineage, version)
    maxNow = math.max(maxNow, now)
  }

  /** A commit from `from` to `to` through this view: its entries now describe `to`. */
  def committed(generation: Long, handle: Int, lineage: Long, from: Long, to: Long): Unit = synchronized {
    if (tag == ((generation, handle, lineage, from))) tag = (generation, handle, lineage, to)
    else epoch += 1
  }

  def describes(version: Long): Boolean = tag._4 == version

  def invalidate(): Unit = synchronized { epoch += 1 }
}
