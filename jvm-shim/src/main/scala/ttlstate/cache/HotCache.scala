package ttlstate.cache

import java.util.concurrent.atomic.AtomicInteger

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.array.ByteArrayMethods
import ttlstate.conf.ConfValues

/** The executor's cache of recently used state entries, kept across batches: encoded key ->
 *  (last-access timestamp, value bytes) per store, so a read of a hot key needs no round trip to
 *  the state server. One per JVM, shared by all stores, bounded in bytes (`cache.maxBytes`).
 *
 *  Dense: entries are appended to segments (byte arrays of up to 256 KiB) and found through an
 *  open-addressing index of their locations (a long array), so the garbage collector sees a few
 *  hundred arrays instead of six objects per entry, which the publishing of every task's entries
 *  would otherwise promote and then evict, batch after batch. Segments stay under half of G1's
 *  smallest region (1 MiB): a larger array is "humongous", placed in regions of its own, and a
 *  1 MiB array (plus its header) took two, doubling the cache's heap. The bound is real:
 *  segments and index together stay within `cache.maxBytes`. Eviction drops the oldest
 *  segment; a hit on an entry in the older half of the segments moves it to the newest one, so
 *  entries in use stay (an approximation of least-recently-used).
 *
 *  Admission: a task whose reads almost never found a value (see `putAll`'s `onlyFound`; a
 *  store that only grows, such as a deduplication of new ids) does not add the keys it wrote:
 *  they would fill the cache, and the heap under it, with entries nobody reads back.
 *
 *  An entry is only ever what the store's committed state holds: each store tags its entries
 *  with an epoch that it renews whenever the server's local DB may have changed by anything but
 *  this provider's own commits (see `CacheView`), which makes all older entries misses. */
object HotCache {
  /** What a key maps to: the value and its last-access time at the tagged version. */
  final class Entry(val epoch: Long, val ts: Long, val value: Array[Byte])

  /** What an entry of `key` -> `value` (null: none) costs the cache. */
  def entryBytes(keyLength: Int, value: Array[Byte]): Long =
    keyLength + (if (value == null) 0 else value.length) + Overhead

  /** One provider instance's share of the cache; `bytes` is written under the cache's lock and
   *  read without it (a metric). */
  final class Owner private[HotCache] (val id: Int) {
    @volatile private[HotCache] var bytes = 0L
  }

  // An entry in a segment: owner id (i32), mixed hash (i32), epoch (i64), ts (i64), key length
  // (i32), value length (i32), key bytes, value bytes. Little-endian.
  private val Header = 32
  private val ArrayBase = Platform.BYTE_ARRAY_OFFSET.toLong

  /** Bytes per entry besides key and value: its header in a segment and its share of the index. */
  val Overhead: Long = Header + 16L
  private val MaxSegmentBytes = 256 << 10
  private val MinSlots = 64
  private val MinSegmentBytes = 256L
  // An index slot: 0 empty, else 1 + the entry's location: the low 25 bits of its hash, the
  // segment's sequence number (its low 20 bits) and the offset in it (18 bits: segments hold at
  // most 256 KiB, or one larger entry at offset 0). Linear probing; a removal shifts the entries
  // after it back (no tombstones). The hash bits in the slot are what a probe compares before it
  // reads the entry's segment, and, for an index of up to 2^25 slots, the entry's home slot: a
  // removal's shifting reads only the index. It read each following entry's hash from its
  // segment, a cache miss per entry of the run (cache hits move their entry, evictions remove
  // whole segments); a cold deduplication ran at 0.9x the rows/s with it.
  private val OffsetBits = 18
  private val SeqBits = 20
  private val HashBits = 25
  private val OffsetMask = (1L << OffsetBits) - 1
  private val SeqMask = (1L << SeqBits) - 1
  private val HashMask = (1L << HashBits) - 1
  private val HashShift = OffsetBits + SeqBits
  // Live segments must have distinct sequence numbers in the slot's bits.
  private val MaxSegments = (1 << SeqBits) - 1
  require(MaxSegmentBytes <= (1 << OffsetBits), "a segment's offsets must fit the slot's offset bits")

  private final class Segment(val seq: Long, val data: Array[Byte]) {
    val buf: java.nio.ByteBuffer = java.nio.ByteBuffer.wrap(data).order(java.nio.ByteOrder.LITTLE_ENDIAN)
    var used = 0
  }

  private val segments = new java.util.ArrayList[Segment]() // oldest first
  private var firstSeq = 0L
  private var nextSeq = 0L
  private var segmentBytes = 0L
  private var spare: Array[Byte] = null // the last evicted segment's array, for the next segment
  private var slots = new Array[Long](MinSlots)
  private var live = 0
  private var bytes = 0L // live entries, by entryBytes
  @volatile private var limit = ConfValues.DEFAULT_CACHE_MAX_BYTES
  private val ownerIds = new AtomicInteger(0)
  private val owners = new java.util.HashMap[Integer, Owner]()

  /** A new owner, one per provider instance. */
  def newOwner(): Owner = synchronized {
    val o = new Owner(ownerIds.incrementAndGet())
    owners.put(o.id, o)
    o
  }

  /** The executor-wide bound; the most recent value applies (all stores of an application see
   *  the same conf). Shrinking evicts at once. */
  def setLimit(maxBytes: Long): Unit = synchronized {
    limit = maxBytes
    spare = null
    evict(0)
  }

  def enabled: Boolean = limit > 0

  /** Whether entries of `bytes` (by `entryBytes`) fit in the cache at all. */
  def fits(bytes: Long): Boolean = bytes <= limit

  /** Bytes of the live entries, by `entryBytes`. */
  def usedBytes: Long = synchronized(bytes)

  /** Bytes the cache holds: its segments and its index. */
  def heapBytes: Long = synchronized(segmentBytes + slots.length * 8L)

  /** Without the lock: a task's metrics waited for another task's publishing (JFR: a tenth of a
   *  cold deduplication's task time went to waits for the lock over 20 ms, half of it here). */
  def ownerBytes(owner: Owner): Long = owner.bytes

  /** The largest segment's array (for tests: none may be humongous). */
  private[ttlstate] def largestSegmentBytes: Long = synchronized {
    var most = 0L
    segments.forEach(s => most = math.max(most, s.data.length.toLong))
    most
  }

  private def mix(owner: Owner, keyHash: Int): Int = {
    val h = keyHash * 31 + owner.id
    h ^ (h >>> 16)
  }

  private def hashBits(h: Int): Long = h & HashMask
  private def slotOf(h: Int, seq: Long, off: Int): Long =
    ((hashBits(h) << HashShift) | ((seq & SeqMask) << OffsetBits) | off) + 1
  private def seqOf(v: Long): Long = firstSeq + ((((v - 1) >>> OffsetBits) - firstSeq) & SeqMask)
  private def segment(v: Long): Segment = segments.get((seqOf(v) - firstSeq).toInt)
  private def offset(v: Long): Int = ((v - 1) & OffsetMask).toInt
  private def hashAt(v: Long): Int = segment(v).buf.getInt(offset(v) + 4)

  /** The hash bits that place slot value `v` in an index of `mask` + 1 slots: from the slot
   *  itself when the index is small enough, else from the entry's segment. */
  private def homeHash(v: Long, mask: Int): Int =
    if (mask <= HashMask) ((v - 1) >>> HashShift).toInt else hashAt(v)

  private def sizeAt(seg: Segment, off: Int): Long =
    seg.buf.getInt(off + 24).toLong + seg.buf.getInt(off + 28) + Overhead

  /** The index slot of `owner`'s key (`len` bytes at `key`, `at`, as `Platform` addresses
   *  them), or -1. */
  private def find(owner: Owner, key: AnyRef, at: Long, len: Int, h: Int): Int = {
    val mask = slots.length - 1
    val bits = hashBits(h)
    var s = h & mask
    while (slots(s) != 0L) {
      val v = slots(s)
      if (((v - 1) >>> HashShift) == bits) {
        val seg = segment(v)
        val off = offset(v)
        if (seg.buf.getInt(off + 4) == h && seg.buf.getInt(off) == owner.id && seg.buf.getInt(off + 24) == len &&
            ByteArrayMethods.arrayEquals(seg.data, ArrayBase + off + Header, key, at, len)) return s
      }
      s = (s + 1) & mask
    }
    -1
  }

  /** The entry of `key` for `owner`, if it belongs to `epoch`; a stale one is dropped. */
  def get(owner: Owner, epoch: Long, key: KeyBytes): Entry = synchronized {
    val h = mix(owner, key.hash)
    val s = find(owner, key.baseObject, key.baseOffset, key.length, h)
    if (s < 0) null
    else {
      val v = slots(s)
      val seg = segment(v)
      val off = offset(v)
      if (seg.buf.getLong(off + 8) != epoch) { drop(s); null }
      else {
        val ts = seg.buf.getLong(off + 16)
        val valueAt = off + Header + key.length
        val value = java.util.Arrays.copyOfRange(seg.data, valueAt, valueAt + seg.buf.getInt(off + 28))
        // In the older half: moved to the newest segment, so that entries in use are not evicted.
        if (seqOf(v) - firstSeq < segments.size / 2) {
          drop(s)
          put0(owner, h, epoch, ts, key.baseObject, key.baseOffset, key.length, value, 0, value.length)
        }
        new Entry(epoch, ts, value)
      }
    }
  }

  /** Remembers the committed state of a task's recorded keys at once (one lock): a value, or
   *  absent. Keys and values are copied from the record's bytes into the segments. With
   *  `onlyFound`, only keys a read of the task found are added; the others' entries are removed
   *  (an entry of an older value must not stay). With `dropRest`, the owner's other entries go
   *  first (a store whose reads hit none of them). */
  def putAll(owner: Owner, epoch: Long, record: TaskRecord, onlyFound: Boolean = false,
      dropRest: Boolean = false): Unit = synchronized {
    if (dropRest) removeEntries(owner)
    val data = record.data
    var i = 0
    while (i < record.size) {
      if (!record.dropped(i)) {
        val h = mix(owner, record.hash(i))
        if (!record.hasValue(i) || limit <= 0 || (onlyFound && !record.found(i))) {
          remove0(owner, data, ArrayBase + record.keyOffset(i), record.keyLength(i), h)
        } else put0(owner, h, epoch, record.ts(i), data, ArrayBase + record.keyOffset(i), record.keyLength(i), data,
          record.valueOffset(i), record.valueLength(i))
      }
      i += 1
    }
  }

  private def put0(owner: Owner, h: Int, epoch: Long, ts: Long, key: AnyRef, keyAt: Long, keyLen: Int,
      value: Array[Byte], valueFrom: Int, valueLen: Int): Unit = {
    remove0(owner, key, keyAt, keyLen, h)
    val size = keyLen + valueLen + Overhead
    if (size > limit / 4) return // one huge value must not flush the rest
    val n = Header + keyLen + valueLen
    val seg = segmentFor(n)
    val off = seg.used
    seg.buf.putInt(off, owner.id).putInt(off + 4, h).putLong(off + 8, epoch).putLong(off + 16, ts)
      .putInt(off + 24, keyLen).putInt(off + 28, valueLen)
    Platform.copyMemory(key, keyAt, seg.data, ArrayBase + off + Header, keyLen.toLong)
    System.arraycopy(value, valueFrom, seg.data, off + Header + keyLen, valueLen)
    seg.used += n
    insert(slotOf(h, seg.seq, off), h)
    account(owner, size)
  }

  /** The newest segment if it has room for `n` bytes, else a new one, after evicting the oldest
   *  ones as far as the limit asks (the evicted array is reused when it has the size). */
  private def segmentFor(n: Int): Segment = {
    val last = if (segments.isEmpty) null else segments.get(segments.size - 1)
    if (last != null && last.data.length - last.used >= n) last
    else {
      val size = math.max(n, math.min(MaxSegmentBytes.toLong, math.max(MinSegmentBytes, limit / 32)).toInt)
      evict(size)
      while (segments.size >= MaxSegments) evictOldest() // a limit of 256 GiB or more
      val data = if (spare != null && spare.length == size) spare else new Array[Byte](size)
      spare = null
      val seg = new Segment(nextSeq, data)
      if (segments.isEmpty) firstSeq = nextSeq
      nextSeq += 1
      segments.add(seg)
      segmentBytes += size
      seg
    }
  }

  /** Puts slot value `v` (hash `h`) in the index, growing it past three quarters full. */
  private def insert(v: Long, h: Int): Unit = {
    if ((live + 1) * 4L > slots.length * 3L) resize(slots.length * 2)
    place(v, h)
    live += 1
  }

  private def place(v: Long, h: Int): Unit = {
    val mask = slots.length - 1
    var s = h & mask
    while (slots(s) != 0L) s = (s + 1) & mask
    slots(s) = v
  }

  /** A new index of `size` slots for the live entries (but `without`'s). */
  private def resize(size: Int, without: Owner = null): Unit = {
    val old = slots
    slots = new Array[Long](size)
    live = 0
    var i = 0
    while (i < old.length) { // a loop, not `foreach`: that boxed every slot (3% of a growth run's allocations)
      val v = old(i)
      if (v != 0L) {
        // Only a removal of an owner reads the entries' segments.
        if (without != null && segment(v).buf.getInt(offset(v)) == without.id)
          account(without, -sizeAt(segment(v), offset(v)))
        else { place(v, homeHash(v, size - 1)); live += 1 }
      }
      i += 1
    }
  }

  /** Empties slot `s`, shifting back the entries after it that probing would no longer reach. */
  private def deleteSlot(s: Int): Unit = {
    val mask = slots.length - 1
    var hole = s
    var j = (s + 1) & mask
    while (slots(j) != 0L) {
      val home = homeHash(slots(j), mask) & mask
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        slots(hole) = slots(j)
        hole = j
      }
      j = (j + 1) & mask
    }
    slots(hole) = 0L
    live -= 1
  }

  def remove(owner: Owner, key: KeyBytes): Unit =
    synchronized(remove0(owner, key.baseObject, key.baseOffset, key.length, mix(owner, key.hash)))

  private def remove0(owner: Owner, key: AnyRef, at: Long, len: Int, h: Int): Unit = {
    val s = find(owner, key, at, len, h)
    if (s >= 0) drop(s)
  }

  /** Removes the entry in slot `s` (its bytes stay in its segment until that is evicted). */
  private def drop(s: Int): Unit = {
    val seg = segment(slots(s))
    val off = offset(slots(s))
    account(owners.get(seg.buf.getInt(off)), -sizeAt(seg, off))
    deleteSlot(s)
  }

  /** Drops every entry of `owner` (a provider closing). */
  def removeOwner(owner: Owner): Unit = synchronized {
    removeEntries(owner)
    owners.remove(owner.id)
  }

  /** Drops every entry of `owner`; a cache left empty gives its segments back to the heap
   *  (otherwise their bytes stay until eviction reaches them). */
  private def removeEntries(owner: Owner): Unit = if (owner.bytes > 0) {
    resize(slots.length, without = owner)
    if (live == 0) {
      segments.clear()
      segmentBytes = 0
      firstSeq = nextSeq
      spare = null
      slots = new Array[Long](MinSlots)
    }
  }

  private def account(owner: Owner, delta: Long): Unit = {
    bytes += delta
    if (owner != null) owner.bytes += delta
  }

  /** Evicts the oldest segments (and their live entries) while segments and index, with `more`
   *  bytes of a new segment, would pass the limit; then shrinks an index that is mostly empty. */
  private def evict(more: Long): Unit = {
    while (!segments.isEmpty && segmentBytes + more + slots.length * 8L > limit) evictOldest()
    if (segments.isEmpty) firstSeq = nextSeq
    var size = slots.length
    while (size > MinSlots && live * 4L < size) size /= 2
    if (size < slots.length) resize(size)
  }

  /** Drops the oldest segment and its live entries. */
  private def evictOldest(): Unit = {
    val seg = segments.get(0)
    var off = 0
    while (off < seg.used) {
      val h = seg.buf.getInt(off + 4)
      val v = slotOf(h, seg.seq, off)
      val mask = slots.length - 1
      var s = h & mask
      while (slots(s) != 0L && slots(s) != v) s = (s + 1) & mask
      if (slots(s) == v) {
        account(owners.get(seg.buf.getInt(off)), -sizeAt(seg, off))
        deleteSlot(s)
      }
      off += Header + seg.buf.getInt(off + 24) + seg.buf.getInt(off + 28)
    }
    segments.remove(0)
    firstSeq += 1
    segmentBytes -= seg.data.length
    if (limit > 0) spare = seg.data
  }
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
