package ttlstate.store

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{StateStoreId, StateStoreMetrics, UnsafeRowPair}
import ttlstate.cache.{KeyBytes, StoreKey}
import ttlstate.client.{PayloadReader, Protocol}
import ttlstate.spark.{MetricNames, Metrics}

/** How one set of a store's entries (the store's, or one column family's) is stored: its keys'
 *  codec and its value rows' field count. */
final case class RowLayout(codec: KeyCodec, numValueFields: Int)

/** One version of one store for one task, backed by the state server: what every Spark line's
 *  `TtlStateStore` does, in Spark-neutral terms.
 *
 *  Writes go through the channel's pipelined queue; reads are answered by `reads` (the task
 *  record, the cross-batch cache, the key filter) or by a round trip; iterations stream chunks
 *  (`Scans`). It holds one connection from load until commit, abort or release. The same object
 *  serves as read store and, after `upgrade()`, as write store (Spark keeps reading through the
 *  read handle after upgrading). */
final class StoreVersion private[store] (core: ProviderCore, channel: StoreChannel, val version: Long,
    private var readOnly: Boolean, val loaded: LoadedVersion, rules: TtlRules, hint: TaskHint) {
  // The store's own rows; a column family has its own (`RowLayout`), given to each call.
  private val default = RowLayout(core.spec.codec, core.spec.valueSchema.length)
  // The time TTL uses: the batch time the server loaded the version at and, in Real-time Mode with
  // `realTime.clockInterval`, the wall clock it advances to while the long batch runs.
  private val clock = new VersionClock(loaded.now)
  private[store] val reads = new CachedReads(version, rules, clock, hint, (kind, k, v) => queueWrite(kind, k, v))
  reads.readOnly = readOnly
  private val scans = new Scans(channel, () => isOpen)
  // Copies of the column families this task prefix-scans key by key; never for a store with TTL,
  // whose entries expire without a write.
  private val mirrors: FamilyMirrors =
    if (rules.ttlMs < 0) new FamilyMirrors(StoreVersion.MirrorAfterScans, StoreVersion.MirrorMaxBytes) else null
  private val key = new KeyBytes // the key of the call in progress: see keyOf
  private var state = "open"
  private var committedVersion = -1L
  private var lastMetrics: StateStoreMetrics = _
  private var committedIds: (Option[String], Option[String]) = (None, None)
  // Loading this version: the LOAD call (a restore when the server rebuilt its local DB) and
  // filling the key filter.
  private[store] var loadNanos = 0L
  // The first access ticks at once: while a Real-time batch runs, its offset log entry is not
  // written yet, so the version was loaded at the previous batch's timestamp (BatchTime).
  private var nextTickNanos: Long = if (core.clockIntervalMs > 0) System.nanoTime() else Long.MaxValue

  def id: StateStoreId = core.id
  def isOpen: Boolean = state == "open"
  def isReadOnly: Boolean = readOnly
  def hasCommitted: Boolean = state == "committed"

  private def requireOpen(): Unit = if (state != "open") throw new IllegalStateException(s"${core.label} version $version is $state")

  private def requireWritable(): Unit = {
    requireOpen()
    if (readOnly) throw new IllegalStateException(s"${core.label} version $version is read-only")
  }

  private def call(what: String, code: Int, w: ttlstate.client.PayloadWriter): PayloadReader = channel.call(what, w.frame(code))

  /** Real-time Mode: at most every `realTime.clockInterval`, before an access, moves the server's
   *  now for this version forward to this executor's wall clock (never back, never below the
   *  batch time). Off (the default): now is the batch time throughout. */
  private def advanceClock(): Unit = if (System.nanoTime() - nextTickNanos >= 0) {
    nextTickNanos = System.nanoTime() + core.clockIntervalMs * 1000000L
    val wall = System.currentTimeMillis()
    if (wall > clock.now) {
      val r = call("set time", Protocol.OP_SET_TIME, channel.request().i64(wall))
      clock.now = math.max(clock.now, r.i64())
    }
  }

  /** The encoded key of `row`, in `key`: a plain key where it is, in Spark's row (nothing is
   *  copied: lookups read it there, and what keeps it copies it), a prefixed one encoded. */
  private def keyOf(row: UnsafeRow, codec: KeyCodec): KeyBytes =
    if (codec.plain) key.set(row.getBaseObject, row.getBaseOffset, row.getSizeInBytes)
    else key.set(codec.encode(row))

  private def valueRow(bytes: Array[Byte], numFields: Int): UnsafeRow =
    if (bytes == null) null
    else { val row = new UnsafeRow(numFields); row.pointTo(bytes, bytes.length); row }

  def upgrade(): StoreVersion = {
    requireOpen()
    reads.upgrade()
    if (readOnly) {
      call("upgrade", Protocol.OP_UPGRADE, channel.request())
      readOnly = false
      if (reads.keyFilter == null) {
        val started = System.nanoTime()
        core.attachKeyFilter(this)
        loadNanos += System.nanoTime() - started
      }
    }
    this
  }

  // -- reads ------------------------------------------------------------------------------

  def get(row: UnsafeRow, layout: RowLayout = default): UnsafeRow = valueRow(getBytes(row, layout.codec), layout.numValueFields)

  /** The stored bytes of `row`'s value (null if absent). */
  private[ttlstate] def getBytes(row: UnsafeRow, codec: KeyCodec): Array[Byte] = {
    requireOpen()
    advanceClock()
    val k = keyOf(row, codec)
    var value = reads.read(k)
    if (value eq CachedReads.Ask) {
      val r = call("get", Protocol.OP_GET, channel.request().bytes(k.baseObject, k.baseOffset, k.length))
      value = r.bytesOrNull()
      reads.learned(k, value, r.i64())
    }
    reads.counted(value != null)
    value
  }

  /** Reads ahead for `get`s to come (`ReadAhead`): of `keys`, those a `get` would have to ask the
   *  server for are fetched in one round trip and remembered as that `get` would remember them.
   *  Returns how many keys it fetched; -1, and nothing is fetched, when reads are not cacheable
   *  (every `get` must reach the server then) or once the task's record refused an entry. */
  def readAhead(keys: Iterator[UnsafeRow]): Int = if (state != "open" || !reads.aheadAllowed) -1 else {
    advanceClock()
    val wanted = new java.util.LinkedHashSet[StoreKey]() // distinct, in input order (copies)
    keys.foreach { row =>
      val k = keyOf(row, default.codec)
      if (reads.wantedAhead(k)) wanted.add(StoreKey.of(k))
    }
    if (!wanted.isEmpty) {
      val w = channel.request().u32(wanted.size)
      wanted.forEach(k => w.bytes(k.bytes))
      val r = call("read ahead", Protocol.OP_GET_ENTRIES, w)
      val it = wanted.iterator()
      (0 until r.u32()).foreach { _ =>
        val k = key.set(it.next().bytes)
        val value = r.bytesOrNull()
        reads.fetchedAhead(k, value, r.i64())
      }
      reads.readAheadKeys += wanted.size
    }
    wanted.size
  }

  def multiGet(keys: Array[UnsafeRow], layout: RowLayout = default): Iterator[UnsafeRow] = {
    requireOpen()
    advanceClock()
    val w = channel.request().u32(keys.length)
    keys.foreach(k => w.bytes(layout.codec.encode(k)))
    val r = call("multiGet", Protocol.OP_MULTI_GET, w)
    (0 until r.u32()).map(_ => valueRow(r.bytesOrNull(), layout.numValueFields)).iterator
  }

  /** Every key of the loaded version (expired ones too), streamed in chunks, into `f`. */
  private[store] def scanKeys(f: Array[Byte] => Unit): Unit = {
    val it = scans.open("keyFilter", channel.request().frame(Protocol.OP_KEYS))
    while (it.hasNext) {
      f(it.reader.bytesOrNull())
      it.reader.bytesOrNull() // no value
      it.consumed()
    }
  }

  /** The live entries of `layout` (`prefix` null: all of them: the store's, or its column
   *  family's), or those of one key prefix, in key order. */
  def scan(what: String, prefix: UnsafeRow, layout: RowLayout = default): RowScan =
    new RowScan(entries(what, if (prefix == null) layout.codec.scope else layout.codec.scanPrefix(prefix)), layout)

  /** The live entries whose stored keys start with `prefix` (null: every entry), in key order, as
   *  stored: a column family's multi-valued entries are read through this. */
  private[ttlstate] def entries(what: String, prefix: Array[Byte]): EntryScan = {
    requireOpen()
    advanceClock()
    new EntryScan(scans.open(what, channel.request().bytes(prefix).frame(Protocol.OP_ITER)))
  }

  /** The live entries whose stored keys start with `prefix`, in key order, of the column family
   *  whose keys start with `scope`: from this task's copy of the family when it has one
   *  (`FamilyMirrors`: made at the family's `MirrorAfterScans`-th prefix scan), else streamed
   *  from the server as `entries` streams them. */
  private[ttlstate] def prefixEntries(what: String, scope: Array[Byte], prefix: Array[Byte]): EntryScan = {
    requireOpen()
    if (mirrors != null && scope != null) {
      var local = mirrors.prefixScan(scope, prefix)
      if (local == null && mirrors.wants(scope)) {
        val all = entries("copy of a column family", scope)
        try if (mirrors.load(scope, Iterator.continually(all).takeWhile(_.hasNext).map { s => s.next(); (s.key, s.value) }))
          local = mirrors.prefixScan(scope, prefix)
        finally all.close()
      }
      if (local != null) return new EntryScan(null, local)
    }
    entries(what, prefix)
  }

  /** Stored entries, streamed in chunks (or, `local`, from a family's copy in this task): the key
   *  after `next()` is `key`, its value `value`. */
  final class EntryScan private[StoreVersion] (chunks: scans.Chunks,
      local: Iterator[(Array[Byte], Array[Byte])] = null) {
    var key: Array[Byte] = _
    var value: Array[Byte] = _
    def hasNext: Boolean = if (local != null) local.hasNext else chunks.hasNext
    def next(): Unit = {
      if (!hasNext) throw new NoSuchElementException("end of ttlstate iterator")
      if (local != null) {
        val (k, v) = local.next()
        key = k
        value = v
      } else {
        chunks.consumed()
        key = chunks.reader.bytesOrNull()
        value = chunks.reader.bytesOrNull()
      }
    }
    def close(): Unit = if (chunks != null) chunks.close()
  }

  /** An iteration as Spark wants it: rows, and a close for a scan not read to its end. */
  final class RowScan private[StoreVersion] (scan: EntryScan, layout: RowLayout) extends Iterator[UnsafeRowPair] {
    override def hasNext: Boolean = scan.hasNext
    override def next(): UnsafeRowPair = {
      scan.next()
      new UnsafeRowPair(layout.codec.decode(scan.key), valueRow(scan.value, layout.numValueFields))
    }
    def close(): Unit = scan.close()
  }

  // -- writes -----------------------------------------------------------------------------

  def put(row: UnsafeRow, value: UnsafeRow, layout: RowLayout = default): Unit = {
    if (value == null) throw new IllegalArgumentException("Cannot put a null value")
    putBytes(row, value.getBytes, layout.codec)
  }

  /** Puts `bytes` as the stored value of `row` (a column family's list of values, as stored). */
  private[ttlstate] def putBytes(row: UnsafeRow, bytes: Array[Byte], codec: KeyCodec): Unit = {
    requireWritable()
    scans.beforeWrite()
    advanceClock()
    val k = keyOf(row, codec)
    val kind = reads.putKind(k)
    channel.queue(kind, k, bytes)
    if (mirrors != null && mirrors.active) mirrors.put(k.toArray, bytes)
    reads.wrote(k, bytes, kind)
  }

  /** Appends `bytes` to the stored value of `row` (none: `bytes` alone): a column family's
   *  ListState merge. The state server appends (WRITE_APPEND, no round trip), so its changelog
   *  logs an append, as Spark's RocksDB provider does (the change feed reports each). A task that
   *  knows the value remembers the whole new one, so what it knows stays exact; one that holds an
   *  entry of the key it cannot answer with (an expired one) reads the value first. */
  private[ttlstate] def appendBytes(row: UnsafeRow, bytes: Array[Byte], codec: KeyCodec): Unit = {
    requireWritable()
    advanceClock()
    val known = reads.read(keyOf(row, codec))
    val base = if ((known eq CachedReads.Ask) && !reads.appendable(key)) getBytes(row, codec) else known
    scans.beforeWrite()
    val kind = reads.putKind(keyOf(row, codec)) // as a put of the key is remembered; the filter learns it
    channel.queue(Protocol.WRITE_APPEND, key, bytes)
    if (base eq CachedReads.Ask) {
      if (mirrors != null && mirrors.active) mirrors.append(key.toArray, bytes)
    } else {
      val whole = if (base == null) bytes else base ++ bytes
      if (mirrors != null && mirrors.active) mirrors.put(key.toArray, whole)
      reads.wrote(key, whole, kind)
    }
  }

  /** Removes every entry whose stored key starts with `prefix` (a column family's), in the state
   *  server (WRITE_REMOVE_PREFIX: the family's key range, pending writes included). */
  private[ttlstate] def removePrefix(prefix: Array[Byte]): Unit = {
    requireWritable()
    scans.beforeWrite()
    advanceClock()
    channel.queue(Protocol.WRITE_REMOVE_PREFIX, key.set(prefix), null)
    if (mirrors != null) mirrors.removePrefix(prefix)
    reads.removedPrefix(prefix)
  }

  def remove(row: UnsafeRow, layout: RowLayout = default): Unit = removeKey(keyOf(row, layout.codec))

  /** Removes the entry stored under exactly `stored` (a key a scan returned). */
  private[ttlstate] def removeStored(stored: Array[Byte]): Unit = removeKey(key.set(stored))

  private def removeKey(k: KeyBytes): Unit = {
    requireWritable()
    scans.beforeWrite()
    advanceClock()
    channel.queue(Protocol.WRITE_REMOVE, k, null)
    if (mirrors != null && mirrors.active) mirrors.remove(k.toArray)
    reads.removed(k)
  }

  /** A pipelined write the cached reads owe the server; scans created earlier must not see it. */
  private def queueWrite(kind: Int, k: KeyBytes, value: Array[Byte]): Unit = {
    scans.beforeWrite()
    channel.queue(kind, k, value)
  }

  // -- lifecycle --------------------------------------------------------------------------

  private def readMetrics(r: PayloadReader): StateStoreMetrics = {
    val numKeys = r.i64()
    val memory = r.i64()
    val reported = (0 until r.u32()).map(_ => r.str() -> r.i64()).toMap
    val custom = Metrics.all.map { m =>
      val v = m.name match {
        case MetricNames.STORE_CALL_COUNT => channel.roundTrips
        case MetricNames.STORE_CALL_TIME_MS => channel.roundTripMillis
        case MetricNames.LOAD_LATENCY_MS => loadNanos / 1000000L
        case MetricNames.BLOOM_FILTER_SKIPPED_READS => reads.readsSkipped
        case MetricNames.CACHE_HITS => reads.cacheHits
        case MetricNames.CACHE_MISSES => reads.cacheMisses
        case MetricNames.READ_AHEAD_KEYS => reads.readAheadKeys
        case MetricNames.CACHE_BYTES => reads.cacheBytes
        case MetricNames.FAMILY_COPY_SCANS => if (mirrors == null) 0L else mirrors.answered
        case MetricNames.TTL_EXPIRED_ON_READ | MetricNames.TTL_EXPIRED_TOTAL | MetricNames.NUM_REMOVED_STATE_ROWS =>
          reported.getOrElse(m.name, 0L) + reads.expiredInCacheReadOnly
        case name => reported.getOrElse(name, 0L)
      }
      m -> v
    }.toMap
    StateStoreMetrics(numKeys, memory, custom)
  }

  /** Commits this version; the version committed. (Reporting the commit to Spark's coordinator is
   *  the Spark line's, where it has one.) */
  def commit(): Long = {
    requireWritable()
    reads.commitStarts()
    try {
      val r = call("commit", Protocol.OP_COMMIT, channel.request())
      committedVersion = r.i64()
      lastMetrics = readMetrics(r)
      committedIds = (Some(r.str()).filter(_.nonEmpty), Some(r.str()).filter(_.nonEmpty))
    } catch {
      case e: Throwable =>
        reads.commitFailed()
        throw e
    }
    if (reads.keyFilter != null) core.keyFilterCommitted(reads.keyFilter, version, committedVersion)
    core.taskHint = reads.committed(loaded.generation, loaded.handle, loaded.lineage, committedVersion)
    reads.end()
    state = "committed"
    channel.giveBack()
    committedVersion
  }

  private def endWithout(code: Int, newState: String): Unit = if (state == "open") {
    reads.end()
    channel.endWithout(code)
    state = newState
  }

  def abort(): Unit = endWithout(Protocol.OP_ABORT, "aborted")
  def release(): Unit = endWithout(Protocol.OP_RELEASE, "released")

  def metrics: StateStoreMetrics = {
    if (lastMetrics == null && state == "open") lastMetrics = readMetrics(call("metrics", Protocol.OP_METRICS, channel.request()))
    if (lastMetrics == null) StateStoreMetrics(0, 0, Metrics.all.map(_ -> 0L).toMap) else lastMetrics
  }

  /** The version this store is (or committed as), and on checkpoint format 2 the committed
   *  version's id and the id it was built on. */
  def checkpointInfo: (Long, Option[String], Option[String]) =
    (if (committedVersion >= 0) committedVersion else version, committedIds._1, committedIds._2)

  def committed: Long = committedVersion
}

object StoreVersion {
  /** The prefix scans of one column family in a version after which the task copies the family
   *  (`FamilyMirrors`): enough that a few scans never read a whole family. */
  val MirrorAfterScans = 64
  /** What one task's copies of column families may take of the heap (keys, values, the maps). */
  val MirrorMaxBytes: Long = 32L << 20
}
