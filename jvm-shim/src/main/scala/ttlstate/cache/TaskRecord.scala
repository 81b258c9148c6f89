package ttlstate.cache

/** What one task has read or written in its version of a store: encoded key -> value (null:
 *  absent), last-access time, and whether the committed store is known to hold the key (a live
 *  entry of the cross-batch cache; a later put tells the server so, and its commit need not look
 *  the key up to count rows).
 *
 *  Dense: key and value bytes live in one byte array, the rest in primitive arrays indexed by an
 *  open-addressing table (linear probing), so a task's tens of thousands of entries are a few
 *  arrays for the garbage collector instead of five objects each, which survived every young
 *  collection of the task and made the heap grow. Bounded: `bytes`, the arrays' real size, never
 *  passes `limitBytes`; a put that would make it pass is refused (false). A refused update of a
 *  key already recorded drops that key from the record (never left stale).
 *
 *  Sized at first for `entriesHint` entries of `bytesHint` key and value bytes in all (what the
 *  store's previous task recorded), so that it need not grow by copying, if that is within the
 *  bound. Records are reused across tasks (`TaskRecord.acquire` / `release`): a task's record is
 *  megabytes of arrays, and allocating them afresh for every task was most of what the shim
 *  allocated, in arrays large enough for the garbage collector to place each in regions of its
 *  own and start a marking cycle for; a growing heap followed.
 *
 *  Not thread-safe: one task writes it; the commit's publishing reads it while the task waits. */
final class TaskRecord(val limitBytes: Long, entriesHint: Int = 0, bytesHint: Long = 0L) {
  import TaskRecord._

  private val (firstEntries, firstData) = {
    val n = math.max(InitialEntries.toLong, entriesHint + entriesHint / 8L)
    val d = math.max(InitialData.toLong, bytesHint + bytesHint / 8)
    if (footprint(d, n, slotsFor(n)) <= limitBytes) (n.toInt, d.toInt) else (InitialEntries, InitialData)
  }
  private var bytesArray = new Array[Byte](firstData)
  private var used = 0
  // Per entry, by index in insertion order.
  private var keyOff = new Array[Int](firstEntries)
  private var keyLen = new Array[Int](firstEntries)
  private var valOff = new Array[Int](firstEntries)
  private var valLen = new Array[Int](firstEntries) // -1: absent
  private var valCap = new Array[Int](firstEntries) // bytes reserved for the value at valOff
  private var stamps = new Array[Long](firstEntries)
  private var hashes = new Array[Int](firstEntries)
  private var flags = new Array[Byte](firstEntries)
  private var count = 0
  // Slot -> the entry's key hash (high 32 bits) and index + 1 (low 32 bits; 0: empty); at most
  // half full. The hash in the slot lets a probe pass over other keys (and find a key absent)
  // without reading the per-entry arrays: each such read is a cache miss in a large record.
  private var table = new Array[Long](slotsFor(firstEntries))
  private var cost = 0L
  private var dropCount = 0L

  /** Entries recorded (dropped ones included): indexes are 0 until size. */
  def size: Int = count

  /** Bytes of keys and values recorded (a hint for the store's next record). */
  def dataBytes: Long = used

  /** The record's heap: its arrays. */
  def bytes: Long = footprint(bytesArray.length, keyOff.length, table.length)

  /** What arrays sized for this record's entries would take. */
  private def usedBytes: Long = footprint(used, count, slotsFor(count))

  /** What the recorded live entries would cost the cross-batch cache (HotCache.entryBytes each,
   *  counted when an entry is added). */
  def cacheBytes: Long = cost

  /** How many recorded keys a refused put dropped so far. */
  def drops: Long = dropCount

  /** The entry of `key`, or -1. */
  def find(key: KeyBytes): Int = {
    val hash = key.hash
    val mask = table.length - 1
    var slot = hash & mask
    while (true) {
      val e = table(slot)
      if (e == 0L) return -1
      if ((e >>> 32).toInt == hash) {
        val i = e.toInt - 1
        if ((flags(i) & Dropped) == 0 && key.equalsAt(bytesArray, keyOff(i), keyLen(i))) return i
      }
      slot = (slot + 1) & mask
    }
    -1
  }

  def hasValue(i: Int): Boolean = valLen(i) >= 0
  def dropped(i: Int): Boolean = (flags(i) & Dropped) != 0
  def ts(i: Int): Long = stamps(i)
  def inCommitted(i: Int): Boolean = (flags(i) & InCommitted) != 0
  /** Whether a read of the key found a value in this task (see `put`'s `found`). */
  def found(i: Int): Boolean = (flags(i) & Found) != 0
  def hash(i: Int): Int = hashes(i)
  // Where entry i's bytes are in `data` (valid until the next put): what the cache copies.
  private[cache] def data: Array[Byte] = bytesArray
  private[cache] def keyOffset(i: Int): Int = keyOff(i)
  private[cache] def keyLength(i: Int): Int = keyLen(i)
  private[cache] def valueOffset(i: Int): Int = valOff(i)
  private[cache] def valueLength(i: Int): Int = math.max(valLen(i), 0)

  def key(i: Int): Array[Byte] = java.util.Arrays.copyOfRange(bytesArray, keyOff(i), keyOff(i) + keyLen(i))

  /** A copy of the entry's value, or null when the key is absent. */
  def value(i: Int): Array[Byte] =
    if (valLen(i) < 0) null else java.util.Arrays.copyOfRange(bytesArray, valOff(i), valOff(i) + valLen(i))

  /** Records that a read of `key` now returns `value` (null: absent) last accessed at `ts`; a
   *  key recorded before keeps `inCommitted` and `found` if it had them (`found`: this is a read
   *  that found `value`). False if the bound refused it (a key
   *  recorded before is then dropped). The bytes are copied: callers may reuse theirs. */
  def put(key: KeyBytes, value: Array[Byte], ts: Long, inCommitted: Boolean,
      found: Boolean = false): Boolean = {
    val marks = (if (inCommitted) InCommitted else 0) | (if (found) Found else 0)
    val n = if (value == null) -1 else value.length
    val i = find(key)
    if (i >= 0) {
      if (n > valCap(i)) {
        if (!ensureData(n)) { flags(i) = (flags(i) | Dropped).toByte; dropCount += 1; return false }
        valOff(i) = used
        valCap(i) = n
        used += n
      }
      if (n > 0) System.arraycopy(value, 0, bytesArray, valOff(i), n)
      valLen(i) = n
      stamps(i) = ts
      flags(i) = (flags(i) | marks).toByte
      true
    } else {
      val room = math.max(n, 0) + key.length
      if (!ensureEntries() || !ensureData(room)) return false
      val j = count
      key.copyTo(bytesArray, used)
      keyOff(j) = used
      keyLen(j) = key.length
      used += key.length
      valOff(j) = used
      valCap(j) = math.max(n, 0)
      valLen(j) = n
      if (n > 0) System.arraycopy(value, 0, bytesArray, used, n)
      used += math.max(n, 0)
      stamps(j) = ts
      hashes(j) = key.hash
      flags(j) = marks.toByte
      count += 1
      insertSlot(j)
      cost += entryCost(j)
      true
    }
  }

  private def entryCost(i: Int): Long = keyLen(i) + math.max(valLen(i), 0) + HotCache.Overhead

  /** Forgets every entry and keeps the arrays (a reused record, or a new version). */
  def reset(): Unit = {
    java.util.Arrays.fill(table, 0L)
    count = 0
    used = 0
    cost = 0L
    dropCount = 0L
  }

  /** Room for `entries` entries of `dataBytes` bytes in all without growing, if within the bound. */
  private def reserve(entries: Long, dataBytes: Long): Unit = {
    val n = math.max(keyOff.length.toLong, entries + entries / 8)
    val d = math.max(bytesArray.length.toLong, dataBytes + dataBytes / 8)
    if ((n > keyOff.length || d > bytesArray.length) && footprint(d, n, slotsFor(n)) <= limitBytes) {
      if (d > bytesArray.length) bytesArray = new Array[Byte](d.toInt)
      if (n > keyOff.length) {
        keyOff = new Array[Int](n.toInt)
        keyLen = new Array[Int](n.toInt)
        valOff = new Array[Int](n.toInt)
        valLen = new Array[Int](n.toInt)
        valCap = new Array[Int](n.toInt)
        stamps = new Array[Long](n.toInt)
        hashes = new Array[Int](n.toInt)
        flags = new Array[Byte](n.toInt)
        table = new Array[Long](slotsFor(n))
      }
    }
  }

  private def insertSlot(i: Int): Unit = {
    val mask = table.length - 1
    var slot = hashes(i) & mask
    while (table(slot) != 0L) slot = (slot + 1) & mask
    table(slot) = (hashes(i).toLong << 32) | (i + 1).toLong
  }

  /** Room for `n` more bytes of keys and values, within the bound. */
  private def ensureData(n: Int): Boolean = (used.toLong + n <= bytesArray.length) || {
    val needed = used.toLong + n
    val fixed = footprint(0, keyOff.length, table.length)
    val grown = math.min(math.max(needed, bytesArray.length * 2L), math.min(limitBytes - fixed, MaxData))
    grown >= needed && {
      bytesArray = java.util.Arrays.copyOf(bytesArray, grown.toInt)
      true
    }
  }

  /** Room for one more entry (and its table slot), within the bound. */
  private def ensureEntries(): Boolean = (count < keyOff.length) || {
    val cap = keyOff.length * 2
    footprint(bytesArray.length, cap, slotsFor(cap)) <= limitBytes && {
      keyOff = java.util.Arrays.copyOf(keyOff, cap)
      keyLen = java.util.Arrays.copyOf(keyLen, cap)
      valOff = java.util.Arrays.copyOf(valOff, cap)
      valLen = java.util.Arrays.copyOf(valLen, cap)
      valCap = java.util.Arrays.copyOf(valCap, cap)
      stamps = java.util.Arrays.copyOf(stamps, cap)
      hashes = java.util.Arrays.copyOf(hashes, cap)
      flags = java.util.Arrays.copyOf(flags, cap)
      table = new Array[Long](slotsFor(cap))
      var i = 0
      while (i < count) { insertSlot(i); i += 1 }
      true
    }
  }
}

object TaskRecord {
  private val InitialData = 4096
  private val InitialEntries = 64
  private val MaxData = Int.MaxValue - 16L
  private val InCommitted = 1
  private val Dropped = 2
  private val Found = 4
  /** Bytes of the per-entry arrays per entry: five ints, a long, an int hash, a flag byte. */
  private val PerEntry = 5 * 4 + 8 + 4 + 1

  /** Table slots for `entries` entries: a power of two, at least twice as many. */
  private def slotsFor(entries: Long): Int = {
    var n = 2
    while (n < entries * 2 && n < (1 << 30)) n *= 2
    n
  }

  private def footprint(dataBytes: Long, entries: Long, slots: Long): Long = dataBytes + entries * PerEntry + slots * 8

  /** A task's bound: 32 MiB, or 1/64 of the JVM's maximum heap if that is less (two tasks per
   *  core may hold one each while the cross-batch cache learns the previous ones). */
  def defaultLimit: Long = math.min(32L << 20, Runtime.getRuntime.maxMemory / 64)

  // Records ended tasks gave back, newest last: at most two per core (a task runs while the
  // cache learns the previous one's) and 1/16 of the heap in all, so the executor keeps a few
  // records, not one per store (a query may have hundreds of partitions).
  private val spares = new java.util.ArrayDeque[TaskRecord]()
  private var spareBytes = 0L
  private def maxSpares: Int = 2 * Runtime.getRuntime.availableProcessors
  private def maxSpareBytes: Long = Runtime.getRuntime.maxMemory / 16

  /** A record for a new task: a spare one, emptied and grown to the hint if it is smaller, or a
   *  new one. */
  def acquire(limitBytes: Long, entriesHint: Int, bytesHint: Long): TaskRecord = {
    val spare = spares.synchronized {
      val r = spares.pollLast()
      if (r != null) spareBytes -= r.bytes
      r
    }
    if (spare == null || spare.limitBytes != limitBytes) new TaskRecord(limitBytes, entriesHint, bytesHint)
    else {
      spare.reset()
      spare.reserve(entriesHint, bytesHint)
      spare
    }
  }

  /** Gives back the record of a task that will not touch it again (nor will anything else).
   *  A record of a megabyte or more that its task used under a quarter of is not kept: the
   *  tasks of its store have become smaller (a store's first batch, then a store that only
   *  grows and records almost nothing), and it would hold the heap for nothing. */
  def release(record: TaskRecord): Unit = {
    val oversized = record.bytes >= (1L << 20) && record.bytes > 4 * record.usedBytes
    record.reset()
    if (!oversized) spares.synchronized {
      if (spares.size < maxSpares && spareBytes + record.bytes <= maxSpareBytes) {
        spares.addLast(record)
        spareBytes += record.bytes
      }
    }
  }

  /** Records kept for reuse (for tests). */
  private[ttlstate] def spareCount: Int = spares.synchronized(spares.size)
}
