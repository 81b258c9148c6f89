package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import ttlstate.cache.CacheView
import ttlstate.cache.Expiry
import ttlstate.cache.HotCache
import ttlstate.cache.KeyBytes
import ttlstate.cache.KeyFilter
import ttlstate.cache.StoreKey
import ttlstate.cache.TaskRecord
import ttlstate.client.PayloadReader
import ttlstate.client.PayloadWriter
import ttlstate.client.Protocol
import ttlstate.client.ServerConnection
import ttlstate.client.CheckpointFiles

/** One version of one store for one task, backed by the state server.
 *
 *  Puts and removes are buffered and sent as one pipelined WRITES frame (no reply) when the
 *  buffer is full or before any synchronous call; reads are synchronous, iterators stream
 *  chunks. It holds one connection from acquisition until commit, abort or release. The same
 *  object serves as read store and, after `upgrade()`, as write store (Spark keeps reading
 *  through the read handle after upgrading). */
final class TtlStateStore(
    provider: TtlStateStoreProvider,
    conn: ServerConnection,
    worker: Int,
    handle: Int,
    override val version: Long,
    private var readOnly: Boolean,
    codec: KeyCodec,
    numValueFields: Int,
    files: CheckpointFiles,
    private[ttlstate] val loaded: LoadedVersion) extends StateStore {

  private val writes = new PayloadWriter(1 << 16)
  private val writesHead = new PayloadWriter(8) // OP_WRITES: handle, count, then `writes`
  // Spark's forceSnapshotOnCommit: the committed version is snapshotted before commit returns.
  private var pendingWrites = 0
  private var state = "open"
  private var committedVersion = -1L
  private var lastMetrics: StateStoreMetrics = _
  /** Checkpoint format 2: the committed version's id and the id it was built on. */
  private var committedIds: (Option[String], Option[String]) = (None, None)
  private var roundTrips = 0L
  private var bridgeNanos = 0L
  // Keys this task has read or written in this version, what a read now returns (null:
  // absent) and its last-access time. Exact when the server says reads are cacheable: within
  // one batch time a live entry stays live and every write to the store goes through this
  // object. Bounded (dense: a few arrays, whatever the number of keys). At commit it is what the
  // cross-batch cache learns. Reused: given back when the task ends (`giveBackRecord`), after
  // which this store holds null, so that a use after the end fails loudly instead of touching
  // another task's record.
  private var known = TaskRecord.acquire(TaskRecord.defaultLimit, provider.recordHint._1, provider.recordHint._2)
  // The cross-batch cache learning `known` on another thread (commit), if it may still run.
  private var publishing: java.util.concurrent.Future[_] = null
  // Set by the provider after LOAD (and on upgrade); null: every read asks the server.
  private[ttlstate] var keyFilter: KeyFilter = null
  private var readsSkipped = 0L
  // Loading this version: the LOAD call (a restore when the server rebuilt its local DB) and
  // filling the key filter. Set by the provider.
  private[ttlstate] var loadNanos = 0L
  // The executor's cross-batch cache of this store's committed entries (HotCache), when the
  // provider attached it: null otherwise. Entries are answered with TTL applied here.
  private[ttlstate] var cache: CacheView = null
  private[ttlstate] var cacheEpoch = 0L
  private var cacheHits = 0L
  private var cacheMisses = 0L
  private var expiredInCacheReadOnly = 0L // a writable store's are counted by the server
  private var writesForgotten = false      // a write `known` had no room for
  // The time TTL uses: the batch time the server loaded the version at and, in Real-time Mode
  // with `realTime.clockInterval`, the wall clock it advances to while the long batch runs.
  private var now: Long = loaded.now
  private val key = new KeyBytes // the key of the call in progress: see keyOf
  // The first access ticks at once: while a Real-time batch runs, its offset log entry is not
  // written yet, so the version was loaded at the previous batch's timestamp (BatchTime).
  private var nextTickNanos: Long = if (provider.clockIntervalMs > 0) System.nanoTime() else Long.MaxValue

  override def id: StateStoreId = provider.stateStoreId
  def isOpen: Boolean = state == "open"
  def isReadOnly: Boolean = readOnly

  private def requireOpen(): Unit =
    if (state != "open") throw new IllegalStateException(s"${provider.label} version $version is $state")

  private def requireWritable(): Unit = {
    requireOpen()
    if (readOnly) throw new IllegalStateException(s"${provider.label} version $version is read-only")
  }

  private def checkCf(cf: String): Unit = if (cf != StateStore.DEFAULT_COL_FAMILY_NAME) {
    throw StateStoreErrors.unsupportedOperationException(s"column family '$cf'", "TtlStateStoreProvider")
  }

  private def flushWrites(): Unit = if (pendingWrites > 0) {
    conn.send(Protocol.OP_WRITES, writesHead.reset().u32(handle).u32(pendingWrites), writes)
    writes.reset()
    pendingWrites = 0
  }

  private def call(what: String, frame: Array[Byte]): PayloadReader = {
    flushWrites()
    val started = System.nanoTime()
    try conn.call(frame, files)
    catch { case e: Throwable => throw provider.errorFor(what, version, e) }
    finally {
      roundTrips += 1
      bridgeNanos += System.nanoTime() - started
    }
  }

  private def request(code: Int): PayloadWriter = new PayloadWriter().u32(handle)

  /** Real-time Mode: at most every `realTime.clockInterval`, before an access, moves the
   *  server's now for this version forward to this executor's wall clock (never back, never
   *  below the batch time). Off (the default): now is the batch time throughout. */
  private def advanceClock(): Unit = if (System.nanoTime() - nextTickNanos >= 0) {
    nextTickNanos = System.nanoTime() + provider.clockIntervalMs * 1000000L
    val wall = System.currentTimeMillis()
    if (wall > now) {
      val r = call("set time", request(Protocol.OP_SET_TIME).i64(wall).frame(Protocol.OP_SET_TIME))
      now = math.max(now, r.i64())
    }
  }

  /** Whether what this task remembers of a key still answers a read at `now`: an absent key
   *  stays absent; a value must not have expired since, and with OnReadAndWrite a write store
   *  must not owe it a refresh (the server then answers, deleting or refreshing the entry). */
  private def stillKnown(i: Int): Boolean = {
    val ttl = provider.ttlMs
    val ts = known.ts(i)
    !known.hasValue(i) || ttl < 0 ||
      (!Expiry.isExpired(ts, ttl, now) && !(provider.updateOnRead && !readOnly && ts != now))
  }

  /** The encoded key of `row`, in `key`: a plain key where it is, in Spark's row (nothing is
   *  copied: lookups read it there, and what keeps it copies it), a prefixed one encoded. */
  private def keyOf(row: UnsafeRow): KeyBytes =
    if (codec.plain) key.set(row.getBaseObject, row.getBaseOffset, row.getSizeInBytes)
    else key.set(codec.encode(row))

  private def valueRow(bytes: Array[Byte]): UnsafeRow = {
    if (bytes == null) null
    else { val row = new UnsafeRow(numValueFields); row.pointTo(bytes, bytes.length); row }
  }

  /** Remembers what a read of `key` returns from now on; false if it could not (full). A key
   *  remembered before that the record had to drop is forgotten (`forget`): it may have been
   *  this task's write. Copies the bytes. */
  private def remember(key: KeyBytes, value: Array[Byte], ts: Long, inCommitted: Boolean = false,
      found: Boolean = false): Boolean = provider.readsCacheable && {
    val drops = known.drops
    known.put(key, value, ts, inCommitted, found) || { if (known.drops != drops) forget(key); false }
  }

  /** Whether this task's reads found almost nothing: under 1/64 of at least 64 reads. */
  private def foundLittle: Boolean = reads >= 64 && readsFound * 64 < reads

  /** Whether the cross-batch cache should learn only the keys this task's reads found (and the
   *  task's record need not keep the new keys it writes, see `put`): when this task's reads and
   *  the previous committed task's found almost nothing (a store that only grows, such as a
   *  deduplication of new ids), the keys it wrote are not read back, and would only fill the
   *  cache and the heap under it. One such task is not enough: the first batch of any store
   *  finds nothing, and a hot set's next batch reads its keys back. */
  private def admitOnlyFound: Boolean = foundLittle && provider.lastTaskFoundLittle

  /** Whether the store's entries in the cross-batch cache should go: a store that only grows
   *  (see `admitOnlyFound`) whose reads hit none of them. The first batch of a store that only
   *  grows left its keys there; they would hold the heap for good. */
  private def dropCached: Boolean = admitOnlyFound && cacheHits == 0

  private def usableCache: Boolean = cache != null && cache.epoch == cacheEpoch && cache.describes(version)

  /** Hands what this task learned to the cross-batch cache: the store's state at the version
   *  the cache view describes (after a commit, the new one). */
  private def publishKnown(): Unit = if (cache != null) {
    // A task whose entries alone exceed the whole cache would evict everything else and then
    // part of its own (tasks that cycle through more than the cache get no hits from an LRU):
    // the store forgets its entries instead, at the cost of one epoch renewal.
    if (HotCache.fits(known.cacheBytes)) HotCache.putAll(cache.owner, cacheEpoch, known, admitOnlyFound, dropCached)
    else cache.invalidate()
  }

  /** A cache hit, with TTL applied as the server would: an expired entry is hidden (and, in a
   *  write store, deleted by the server, which counts it); OnReadAndWrite refreshes a live one. */
  private def fromCache(key: KeyBytes, e: HotCache.Entry): Array[Byte] = {
    val ttl = provider.ttlMs
    if (ttl >= 0 && Expiry.isExpired(e.ts, ttl, now)) {
      HotCache.remove(cache.owner, key)
      if (readOnly) expiredInCacheReadOnly += 1 else queueWrite(Protocol.WRITE_REMOVE_EXPIRED, key, null)
      if (!remember(key, null, 0L) && !readOnly) forget(key)
      null
    } else {
      if (!readOnly && provider.updateOnRead && e.ts != now) {
        queueWrite(Protocol.WRITE_PUT_PRESENT, key, e.value) // the server stamps it with its time
        if (!remember(key, e.value, now, inCommitted = true, found = true)) forget(key)
      } else remember(key, e.value, e.ts, inCommitted = true, found = true)
      e.value
    }
  }

  def upgrade(): TtlStateStore = {
    requireOpen()
    if (usableCache) publishKnown() // committed entries of this version, as read
    known.reset() // read-only reads neither refresh nor delete: forget them
    if (readOnly) {
      call("upgrade", request(Protocol.OP_UPGRADE).frame(Protocol.OP_UPGRADE))
      readOnly = false
      if (keyFilter == null) {
        val started = System.nanoTime()
        provider.attachKeyFilter(this)
        loadNanos += System.nanoTime() - started
      }
    }
    this
  }

  // -- reads ------------------------------------------------------------------------------
  override def get(key: UnsafeRow, colFamilyName: String): UnsafeRow = {
    val row = get0(key, colFamilyName)
    reads += 1
    if (row != null) readsFound += 1
    row
  }
  private var reads = 0L
  private var readsFound = 0L

  private def get0(row: UnsafeRow, colFamilyName: String): UnsafeRow = {
    requireOpen()
    checkCf(colFamilyName)
    advanceClock()
    val k = keyOf(row)
    val i = known.find(k)
    if (i >= 0) {
      if (stillKnown(i)) return valueRow(known.value(i))
    } else {
      if (usableCache) {
        val e = HotCache.get(cache.owner, cacheEpoch, k)
        if (e != null) { cacheHits += 1; return valueRow(fromCache(k, e)) }
        cacheMisses += 1
      }
      if (keyFilter != null && !keyFilter.mightContain(k)) { readsSkipped += 1; return null }
    }
    val r = call("get", request(Protocol.OP_GET).bytes(k.baseObject, k.baseOffset, k.length).frame(Protocol.OP_GET))
    val value = r.bytesOrNull()
    remember(k, value, r.i64(), found = value != null)
    valueRow(value)
  }

  /** Reads ahead for `get`s to come (`ReadAhead`): of `keys`, those a `get` would have to ask
   *  the server for are fetched in one round trip and remembered as that `get` would remember
   *  them, so the `get`s are answered here. Keys this task knows already (its own write must win),
   *  keys the cross-batch cache holds and keys the key filter rules out are not asked for. Returns
   *  how many keys it fetched; -1, and nothing is fetched, when reads are not cacheable (every
   *  `get` must reach the server then) or once the task's record refused an entry (what it
   *  fetched would be fetched again). */
  private[spark] def readAhead(keys: Iterator[UnsafeRow]): Int =
      if (state != "open" || !provider.readsCacheable || readAheadFull) -1 else {
    advanceClock()
    val wanted = new java.util.LinkedHashSet[StoreKey]() // distinct, in input order (copies)
    val cached = usableCache
    keys.foreach { row =>
      val k = keyOf(row)
      if (known.find(k) < 0 && (keyFilter == null || keyFilter.mightContain(k)) &&
          !(cached && HotCache.get(cache.owner, cacheEpoch, k) != null)) wanted.add(StoreKey.of(k))
    }
    if (!wanted.isEmpty) {
      val w = request(Protocol.OP_GET_ENTRIES).u32(wanted.size)
      wanted.forEach(k => w.bytes(k.bytes))
      val r = call("read ahead", w.frame(Protocol.OP_GET_ENTRIES))
      val it = wanted.iterator()
      (0 until r.u32()).foreach { _ =>
        val k = key.set(it.next().bytes)
        val value = r.bytesOrNull()
        if (!remember(k, value, r.i64(), found = value != null)) readAheadFull = true
      }
      readAheadKeys += wanted.size
    }
    wanted.size
  }
  private var readAheadKeys = 0L
  private var readAheadFull = false

  override def multiGet(keys: Array[UnsafeRow], colFamilyName: String): Iterator[UnsafeRow] = {
    requireOpen()
    checkCf(colFamilyName)
    advanceClock()
    val w = request(Protocol.OP_MULTI_GET).u32(keys.length)
    keys.foreach(k => w.bytes(codec.encode(k)))
    val r = call("multiGet", w.frame(Protocol.OP_MULTI_GET))
    (0 until r.u32()).map(_ => valueRow(r.bytesOrNull())).iterator
  }

  /** A chunked server-side iteration (OP_ITER or OP_KEYS, then OP_ITER_NEXT): each entry is
   *  read from `reader` after `hasNext`, then `consumed()`.
   *
   *  It starts lazily, at the first `hasNext`: Spark's deduplication creates an eviction
   *  iterator every batch and, without a watermark, never reads it; starting eagerly would cost
   *  a round trip and a first chunk of TTL-checked rows per partition and batch for nothing. A
   *  scan's view must still be the store as of the `iterator()` call, so a write before the
   *  first `hasNext` starts every unstarted scan first (`startScans`). */
  private final class Chunks(what: String, first: Array[Byte]) {
    var reader: PayloadReader = _
    private var iterId = 0
    private var started = false
    private var done = false
    private var remaining = 0
    private def readHeader(): Unit = { done = reader.u8() == 1; remaining = reader.u32() }
    unstarted = this :: unstarted

    def start(): Unit = if (!started) {
      started = true
      unstarted = unstarted.filterNot(_ eq this)
      reader = call(what, first)
      iterId = reader.u32()
      readHeader()
    }

    def hasNext: Boolean = {
      start()
      while (remaining == 0 && !done) {
        reader = call(what, request(Protocol.OP_ITER_NEXT).u32(iterId).frame(Protocol.OP_ITER_NEXT))
        readHeader()
      }
      remaining > 0
    }
    def consumed(): Unit = remaining -= 1
    def close(): Unit = {
      if (!started) { started = true; done = true; unstarted = unstarted.filterNot(_ eq this) }
      if (!done && state == "open") {
        call(what, request(Protocol.OP_ITER_CLOSE).u32(iterId).frame(Protocol.OP_ITER_CLOSE))
        done = true
      }
    }
  }

  private var unstarted: List[Chunks] = Nil

  /** Before a write: scans created earlier must not see it. */
  private def startScans(): Unit = if (unstarted.nonEmpty) unstarted.reverse.foreach(_.start())

  /** Every key of the loaded version (expired ones too), streamed in chunks, into `f`. */
  private[ttlstate] def scanKeys(f: Array[Byte] => Unit): Unit = {
    val it = new Chunks("keyFilter", request(Protocol.OP_KEYS).frame(Protocol.OP_KEYS))
    while (it.hasNext) {
      f(it.reader.bytesOrNull())
      it.reader.bytesOrNull() // no value
      it.consumed()
    }
  }

  private def scan(what: String, prefix: Array[Byte]): StateStoreIterator[UnsafeRowPair] = {
    requireOpen()
    advanceClock()
    val chunks = new Chunks(what, request(Protocol.OP_ITER).bytes(prefix).frame(Protocol.OP_ITER))
    val it = new Iterator[UnsafeRowPair] {
      override def hasNext: Boolean = chunks.hasNext
      override def next(): UnsafeRowPair = {
        if (!hasNext) throw new NoSuchElementException("end of ttlstate iterator")
        chunks.consumed()
        new UnsafeRowPair(codec.decode(chunks.reader.bytesOrNull()), valueRow(chunks.reader.bytesOrNull()))
      }
    }
    new StateStoreIterator(it, () => chunks.close())
  }

  override def iterator(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    checkCf(colFamilyName)
    scan("iterator", null)
  }

  override def prefixScan(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    checkCf(colFamilyName)
    scan("prefixScan", codec.scanPrefix(prefixKey))
  }

  // -- writes -----------------------------------------------------------------------------
  override def put(row: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = {
    requireWritable()
    checkCf(colFamilyName)
    startScans()
    if (value == null) throw new IllegalArgumentException("Cannot put a null value")
    advanceClock()
    val k = keyOf(row)
    val bytes = value.getBytes
    // A key the filter has never seen is not in the committed store (no false negatives): the
    // server then counts it as new at commit without reading it.
    val isNew = keyFilter != null && !keyFilter.mightContain(k)
    val kind =
      if (isNew) Protocol.WRITE_PUT_NEW
      else if (isKnownInCommitted(k)) Protocol.WRITE_PUT_PRESENT
      else Protocol.WRITE_PUT
    queueWrite(kind, k, bytes)
    if (keyFilter != null) keyFilter.add(k)
    // A new key of a task whose reads found almost nothing (a store that only grows) is not
    // remembered: this task will not read it back, and the record would hold every key it
    // writes. Exact: the record has no entry of it (checked: a remove may have left one), the
    // cache none (it never held it), and a repeat reads through the server, which has the write.
    if (!(isNew && admitOnlyFound && known.find(k) < 0) && !remember(k, bytes, now)) forget(k)
  }

  /** A write `known` has no room for: the cache's committed entry of the key must no longer
   *  answer this task's reads (the server does, with the pending write), and at commit the
   *  cache starts afresh. A remembered write needs neither: `known` answers first, and the
   *  commit hands it to the cache. */
  private def forget(key: KeyBytes): Unit = {
    writesForgotten = true
    if (cache != null) HotCache.remove(cache.owner, key)
  }

  private def isKnownInCommitted(key: KeyBytes): Boolean = {
    val i = known.find(key)
    i >= 0 && known.inCommitted(i)
  }

  /** A pipelined write (no reply); scans created earlier must not see it. */
  private def queueWrite(kind: Int, key: KeyBytes, value: Array[Byte]): Unit = {
    startScans()
    writes.u8(kind).bytes(key.baseObject, key.baseOffset, key.length)
    if (value != null) writes.bytes(value)
    pendingWrites += 1
    if (writes.size >= provider.writeBatchBytes) flushWrites()
  }

  override def remove(row: UnsafeRow, colFamilyName: String): Unit = {
    requireWritable()
    checkCf(colFamilyName)
    startScans()
    advanceClock()
    val k = keyOf(row)
    queueWrite(Protocol.WRITE_REMOVE, k, null)
    if (!remember(k, null, 0L)) forget(k)
  }

  // -- lifecycle --------------------------------------------------------------------------
  private def readMetrics(r: PayloadReader): StateStoreMetrics = {
    val numKeys = r.i64()
    val memory = r.i64()
    val reported = (0 until r.u32()).map(_ => r.str() -> r.i64()).toMap
    val custom = Metrics.all.map { m =>
      val v = m.name match {
        case MetricNames.STORE_CALL_COUNT => roundTrips
        case MetricNames.STORE_CALL_TIME_MS => bridgeNanos / 1000000L
        case MetricNames.LOAD_LATENCY_MS => loadNanos / 1000000L
        case MetricNames.BLOOM_FILTER_SKIPPED_READS => readsSkipped
        case MetricNames.CACHE_HITS => cacheHits
        case MetricNames.CACHE_MISSES => cacheMisses
        case MetricNames.READ_AHEAD_KEYS => readAheadKeys
        case MetricNames.CACHE_BYTES => if (cache == null) 0L else HotCache.ownerBytes(cache.owner)
        case MetricNames.TTL_EXPIRED_ON_READ | MetricNames.TTL_EXPIRED_TOTAL | MetricNames.NUM_REMOVED_STATE_ROWS =>
          reported.getOrElse(m.name, 0L) + expiredInCacheReadOnly
        case name => reported.getOrElse(name, 0L)
      }
      m -> v
    }.toMap
    StateStoreMetrics(numKeys, memory, custom)
  }

  private def finish(newState: String): Unit = {
    state = newState
    conn.server.giveBack(conn, worker)
  }

  override def commit(): Long = {
    requireWritable()
    // The cross-batch cache learns this task's entries on another thread while the server
    // commits (publishing is CPU work in this JVM; the commit is mostly a wait for the
    // server). Exact: until commit returns nothing reads this store's entries, the entries are
    // tagged with the epoch they were published under, and a commit that fails renews the
    // epoch (they become misses); commit returns only once they are all in.
    publishing =
      if (cache != null && !writesForgotten && usableCache && HotCache.fits(known.cacheBytes)) {
        val (owner, epoch, entries, onlyFound, dropRest) = (cache.owner, cacheEpoch, known, admitOnlyFound, dropCached)
        TtlStateStore.inBackground(() => HotCache.putAll(owner, epoch, entries, onlyFound, dropRest))
      } else null
    try {
      val r = call("commit", request(Protocol.OP_COMMIT).frame(Protocol.OP_COMMIT))
      committedVersion = r.i64()
      lastMetrics = readMetrics(r)
      committedIds = (Some(r.str()).filter(_.nonEmpty), Some(r.str()).filter(_.nonEmpty))
    } catch {
      case e: Throwable =>
        if (publishing != null) {
          TtlStateStore.awaitQuietly(publishing)
          cache.invalidate()
        }
        throw e
    }
    if (keyFilter != null) provider.keyFilterCommitted(keyFilter, version, committedVersion)
    if (cache != null) {
      // A write this task could not remember leaves the cache unsure of that key: start afresh.
      if (writesForgotten) cache.invalidate()
      else if (publishing != null) { if (!TtlStateStore.awaitQuietly(publishing)) cache.invalidate() }
      else if (usableCache) publishKnown()
      cache.committed(loaded.generation, loaded.handle, loaded.lineage, version, committedVersion)
    }
    provider.recordHint = (known.size, known.dataBytes)
    provider.lastTaskFoundLittle = foundLittle
    giveBackRecord()
    finish("committed")
    if (provider.commitValidation) {
      StateStore.reportCommitToCoordinator(committedVersion, provider.commitStateStoreId, provider.hadoop)
    }
    committedVersion
  }

  /** Published (or never to be): the record goes back for another task, unless an interrupt
   *  ended the wait while the cache may still read it (then it is left to the collector). */
  private def giveBackRecord(): Unit = if (known != null && (publishing == null || publishing.isDone)) {
    val record = known
    known = null
    TaskRecord.release(record)
  }

  private def endWithout(code: Int, newState: String): Unit = if (state == "open") {
    writes.reset()
    pendingWrites = 0
    giveBackRecord()
    // Best effort. A connection an interrupt closed is not used: the server already aborted what
    // it left open when the connection dropped.
    if (!conn.broken) try conn.call(request(code).frame(code), files) catch { case _: Exception => }
    finish(newState)
  }

  override def abort(): Unit = endWithout(Protocol.OP_ABORT, "aborted")
  override def release(): Unit = endWithout(Protocol.OP_RELEASE, "released")
  override def hasCommitted: Boolean = state == "committed"

  override def metrics: StateStoreMetrics = {
    if (lastMetrics == null && state == "open") {
      lastMetrics = readMetrics(call("metrics", request(Protocol.OP_METRICS).frame(Protocol.OP_METRICS)))
    }
    if (lastMetrics == null) StateStoreMetrics(0, 0, Metrics.all.map(_ -> 0L).toMap) else lastMetrics
  }

  override def getStateStoreCheckpointInfo(): StateStoreCheckpointInfo =
    StateStoreCheckpointInfo(id.partitionId, if (committedVersion >= 0) committedVersion else version,
      committedIds._1, committedIds._2)

  override def allColumnFamilyNames: Set[String] = Set(StateStore.DEFAULT_COL_FAMILY_NAME)

  // -- what ttlstate does not support (Spark only calls these for TWS / join v3+) --------
  private def unsupported(op: String) = StateStoreErrors.unsupportedOperationException(op, "TtlStateStoreProvider")
  override def valuesIterator(key: UnsafeRow, colFamilyName: String): Iterator[UnsafeRow] = throw unsupported("valuesIterator")
  override def prefixScanWithMultiValues(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    throw unsupported("prefixScanWithMultiValues")
  override def iteratorWithMultiValues(colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    throw unsupported("iteratorWithMultiValues")
  override def removeColFamilyIfExists(colFamilyName: String): Boolean = throw unsupported("removeColFamilyIfExists")
  override def createColFamilyIfAbsent(colFamilyName: String, keySchema: StructType, valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec, useMultipleValuesPerKey: Boolean, isInternal: Boolean): Unit =
    throw unsupported("createColFamilyIfAbsent")
  override def putList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit = throw unsupported("putList")
  override def merge(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = throw unsupported("merge")
  override def mergeList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit = throw unsupported("mergeList")
}

private[spark] object TtlStateStore {
  private val publisher = java.util.concurrent.Executors.newCachedThreadPool { (r: Runnable) =>
    val t = new Thread(r, "ttlstate-cache-publish")
    t.setDaemon(true)
    t
  }

  def inBackground(work: () => Unit): java.util.concurrent.Future[_] = publisher.submit(new Runnable {
    override def run(): Unit = work()
  })

  /** Waits for `work` to end; whether it succeeded. An interrupt ends the wait (the task is
   *  being killed) and stays set. */
  def awaitQuietly(work: java.util.concurrent.Future[_]): Boolean =
    try { work.get(); true }
    catch {
      case _: InterruptedException =>
        Thread.currentThread().interrupt()
        false
      case _: Exception => false
    }
}
