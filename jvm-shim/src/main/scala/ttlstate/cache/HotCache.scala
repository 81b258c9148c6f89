package ttlstate.cache

import java.util.concurrent.atomic.AtomicLong
import ttlstate.conf.ConfValues

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
    def size(key: StoreKey): Long = entryBytes(key, value)
  }

  /** What an entry of `key` -> `value` (null: none) costs the cache. */
  def entryBytes(key: StoreKey, value: Array[Byte]): Long =
    key.bytes.length + (if (value == null) 0 else value.length) + Overhead

  /** One provider instance's share of the cache; `bytes` is guarded by the cache's lock. */
  final class Owner private[HotCache] (val id: Long) {
    private[HotCache] var bytes = 0L
  }

  /** An owner's key; its hash is the key's, computed once, mixed with the owner. */
  private final class Key(val owner: Owner, val key: StoreKey) {
    override val hashCode: Int = key.hashCode * 31 + java.lang.Long.hashCode(owner.id)
    override def equals(o: Any): Boolean = o match {
      case k: Key => (k.owner eq owner) && k.key == key
      case _ => false
    }
  }

  /** Bytes per entry besides key and value: map node, key wrappers, entry object, array headers. */
  val Overhead = 176L

  private val map = new java.util.LinkedHashMap[Key, Entry](1 << 12, 0.75f, true)
  private var bytes = 0L
  @volatile private var limit = ConfValues.DEFAULT_CACHE_MAX_BYTES
  private val owners = new AtomicLong(0)

  /** A new owner, one per provider instance. */
  def newOwner(): Owner = new Owner(owners.incrementAndGet())

  /** The executor-wide bound; the most recent value applies (all stores of an application see
   *  the same conf). Shrinking evicts at once. */
  def setLimit(maxBytes: Long): Unit = synchronized {
    limit = maxBytes
    evict()
  }

  def enabled: Boolean = limit > 0

  /** Whether entries of `bytes` (by `entryBytes`) fit in the cache at all. */
  def fits(bytes: Long): Boolean = bytes <= limit

  def usedBytes: Long = synchronized(bytes)

  def ownerBytes(owner: Owner): Long = synchronized(owner.bytes)

  /** The entry of `key` for `owner`, if it belongs to `epoch`; a stale one is dropped. */
  def get(owner: Owner, epoch: Long, key: StoreKey): Entry = synchronized {
    val k = new Key(owner, key)
    val e = map.get(k)
    if (e == null) null
    else if (e.epoch == epoch) e
    else { drop(k, e); null }
  }

  /** Remembers the committed state of a task's recorded keys at once (one lock): a value, or
   *  absent. Keys and values are copied out of the record. */
  def putAll(owner: Owner, epoch: Long, record: TaskRecord): Unit = synchronized {
    var i = 0
    while (i < record.size) {
      if (!record.dropped(i)) {
        val key = StoreKey.withHash(record.key(i), record.hash(i))
        if (!record.hasValue(i) || limit <= 0) remove0(owner, key)
        else put0(owner, key, new Entry(epoch, record.ts(i), record.value(i)))
      }
      i += 1
    }
    evict()
  }

  private def put0(owner: Owner, key: StoreKey, e: Entry): Unit = {
    if (e.size(key) > limit / 4) { remove0(owner, key); return } // one huge value must not flush the rest
    val k = new Key(owner, key)
    val old = map.put(k, e)
    if (old != null) account(owner, -old.size(key))
    account(owner, e.size(key))
  }

  def remove(owner: Owner, key: StoreKey): Unit = synchronized(remove0(owner, key))

  private def remove0(owner: Owner, key: StoreKey): Unit = {
    val k = new Key(owner, key)
    val old = map.get(k)
    if (old != null) drop(k, old)
  }

  /** Drops every entry of `owner` (a provider closing). */
  def removeOwner(owner: Owner): Unit = synchronized {
    val it = map.entrySet.iterator
    while (it.hasNext) {
      val e = it.next()
      if (e.getKey.owner == owner) {
        account(owner, -e.getValue.size(e.getKey.key))
        it.remove()
      }
    }
  }

  private def drop(k: Key, e: Entry): Unit = {
    map.remove(k)
    account(k.owner, -e.size(k.key))
  }

  private def account(owner: Owner, delta: Long): Unit = {
    bytes += delta
    owner.bytes += delta
  }

  private def evict(): Unit = {
    val it = map.entrySet.iterator
    while (bytes > limit && it.hasNext) {
      val e = it.next()
      account(e.getKey.owner, -e.getValue.size(e.getKey.key))
      it.remove()
    }
  }
}

/** An encoded state key as a map key: equality by content, the hash computed once (a key is
 *  looked up in several maps per operation). Its bytes must not change while a map holds it:
 *  `stable()` before keeping a key whose bytes the caller may reuse. */
final class StoreKey private (val bytes: Array[Byte], override val hashCode: Int) {
  def this(bytes: Array[Byte]) = this(bytes, StoreKey.hashOf(bytes))
  def stable(): StoreKey = new StoreKey(java.util.Arrays.copyOf(bytes, bytes.length), hashCode)
  override def equals(o: Any): Boolean = o match {
    case k: StoreKey => k.hashCode == hashCode && java.util.Arrays.equals(k.bytes, bytes)
    case _ => false
  }
}

object StoreKey {
  /** The hash a StoreKey of `bytes` has (TaskRecord indexes keys by it too). */
  def hashOf(bytes: Array[Byte]): Int = scala.util.hashing.MurmurHash3.bytesHash(bytes)

  /** A StoreKey of `bytes` whose `hashOf` is known to be `hash`. */
  private[ttlstate] def withHash(bytes: Array[Byte], hash: Int): StoreKey = new StoreKey(bytes, hash)
}

/** One provider's use of the cache: which committed version its entries describe (`version`),
 *  for which server lineage, under which epoch. Like the key filter, it is valid only while the
 *  server's local DB advanced by this provider's own commits; anything else renews the epoch. */
final class CacheView(val owner: HotCache.Owner) {
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
