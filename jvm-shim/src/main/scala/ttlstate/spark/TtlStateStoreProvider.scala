package ttlstate.spark

import java.util.UUID

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.TaskContext
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import org.apache.spark.ttlstatebridge.NextIteratorBridge
import ttlstate.cache.CacheView
import ttlstate.client.CheckpointFiles
import ttlstate.cache.HotCache
import ttlstate.cache.KeyFilter
import ttlstate.client.ConnectionLost
import ttlstate.client.Json
import ttlstate.client.PayloadReader
import ttlstate.client.PayloadWriter
import ttlstate.client.Protocol
import ttlstate.client.ServerConnection
import ttlstate.client.ServerDied
import ttlstate.client.ServerError
import ttlstate.conf.ConfKeys
import ttlstate.metadata.BatchTime
import ttlstate.metadata.OperatorNames
import ttlstate.metadata.QueryIdentity
import ttlstate.server.RunningServer
import ttlstate.server.ServerLaunch
import ttlstate.server.StateServer
import ttlstate.conf.{ConfValues, ShimConfs}

/** Spark's entry point. Thin: every store operation goes to the ttlstate state server.
 *
 *  The constructor does nothing: Spark creates throwaway instances on the driver just to read
 *  `supportedCustomMetrics`, so no process may start before `init`/`getStore`. */
class TtlStateStoreProvider extends StateStoreProvider with SupportsFineGrainedReplay {
  private var id: StateStoreId = _
  private var keySchema: StructType = _
  private var valueSchema: StructType = _
  private var storeConf: StateStoreConf = _
  private var hadoopConf: Configuration = _
  private var codec: KeyCodec = _
  private var files: CheckpointFiles = _
  private var providerKey: String = _
  private var runId: String = _
  private var openJson: (String, String) = _
  private var launch: ServerLaunch = _
  private var operatorName: Option[String] = None
  /** Checkpoint format 2: versions are loaded by the id Spark's commit log recorded. */
  private[ttlstate] var checkpointIds = false
  private[ttlstate] var writeBatchBytes: Int = ConfValues.DEFAULT_WRITE_BATCH_BYTES
  @volatile private var opened: (Long, Int) = (-1L, -1)
  @volatile private[ttlstate] var readsCacheable = false
  @volatile private var keyFilterAllowed = false
  private var keyFilterMaxKeys: Int = ConfValues.DEFAULT_KEY_FILTER_MAX_KEYS
  private var keyFilterMaxBytes: Long = ConfValues.DEFAULT_KEY_FILTER_MAX_BYTES
  @volatile private var keyFilter: KeyFilter = null
  @volatile private[ttlstate] var ttlMs: Long = -1L        // the store's TTL as the server applies it; -1: off
  @volatile private[ttlstate] var updateOnRead = false
  private var cacheMaxBytes: Long = ConfValues.DEFAULT_CACHE_MAX_BYTES
  // Real-time Mode: how often a loaded version's "now" advances to the wall clock; -1: never.
  private[ttlstate] var clockIntervalMs: Long = -1L
  private lazy val cacheView = new CacheView(HotCache.newOwner())
  // What the last committed task of this store recorded (entries, key and value bytes): the
  // size a new task's record starts at.
  @volatile private[ttlstate] var recordHint: (Int, Long) = (0, 0L)
  // Whether the last committed task's reads found almost nothing (see TtlStateStore.admitOnlyFound).
  @volatile private[ttlstate] var lastTaskFoundLittle = false

  override def init(
      stateStoreId: StateStoreId,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useColumnFamilies: Boolean,
      storeConfs: StateStoreConf,
      hadoopConf: Configuration,
      useMultipleValuesPerKey: Boolean,
      stateSchemaProvider: Option[StateSchemaProvider]): Unit = {
    if (useColumnFamilies) throw StateStoreErrors.unsupportedOperationException("column families", "TtlStateStoreProvider")
    if (useMultipleValuesPerKey) throw StateStoreErrors.unsupportedOperationException("multiple values per key", "TtlStateStoreProvider")
    this.checkpointIds = storeConfs.enableStateStoreCheckpointIds
    this.id = stateStoreId
    this.keySchema = keySchema
    this.valueSchema = valueSchema
    this.storeConf = storeConfs
    this.hadoopConf = hadoopConf
    this.codec = KeyCodec(keyStateEncoderSpec, keySchema)
    this.files = new CheckpointFiles(new Path(stateStoreId.storeCheckpointLocation().toString), hadoopConf)
    val confs = storeConfs.sqlConfs.filter(_._1.startsWith(ConfKeys.PREFIX))
    this.launch = ServerLaunch.of(confs)
    val shim = ShimConfs.of(confs)
    this.writeBatchBytes = shim.writeBatchBytes
    this.cacheMaxBytes = shim.cacheMaxBytes
    this.clockIntervalMs = shim.clockIntervalMs
    this.keyFilterMaxKeys = shim.keyFilterMaxKeys
    this.keyFilterMaxBytes = shim.keyFilterMaxBytes
    // A streaming query's tasks carry its query id as a local property; the state data source's
    // tasks do not (their Hadoop conf may still hold a run id copied from the session's SQL conf,
    // which must not make a reader share the running query's stores).
    val inStreamingTask = Option(TaskContext.get()).forall(_.getLocalProperty("sql.streaming.queryId") != null)
    val queryRun = Option(hadoopConf.get("sql.streaming.runId")).filter(_ => inStreamingTask)
    val runId = queryRun.getOrElse(UUID.randomUUID().toString)
    this.runId = runId
    this.providerKey = Seq(stateStoreId.checkpointRootLocation, stateStoreId.operatorId,
      stateStoreId.partitionId, stateStoreId.storeName, runId).mkString("|")
    // The names of the query's operators (`operator.<name>.ttl`, and the logs), from Spark's state metadata.
    val operatorNames = OperatorNames.of(stateStoreId.checkpointRootLocation, queryRun, hadoopConf)
    this.operatorName = operatorNames.get(stateStoreId.operatorId)
    val info = openInfo(stateStoreId, keySchema, valueSchema, operatorNames, queryRun, hadoopConf)
    this.openJson = (Json.obj(confs.toSeq.map { case (k, v) => k -> Json.str(v) }), Json.obj(info))
    StateServer.watchApplication()
  }

  /** What the server is told about the store at OPEN, besides the confs. */
  private def openInfo(stateStoreId: StateStoreId, keySchema: StructType, valueSchema: StructType,
      operatorNames: Map[Long, String], queryRun: Option[String], hadoopConf: Configuration): Seq[(String, String)] =
    Seq(
      "operatorId" -> stateStoreId.operatorId.toString,
      "partitionId" -> stateStoreId.partitionId.toString,
      "storeName" -> Json.str(stateStoreId.storeName),
      "checkpointDir" -> Json.str(stateStoreId.storeCheckpointLocation().toString),
      "keySchema" -> Json.str(keySchema.json),
      "valueSchema" -> Json.str(valueSchema.json),
      "operatorNames" -> OperatorNames.json(operatorNames),
      // The server logs each store it opens at INFO when the executor's log shows INFO (not the
      // console of a local session, which Spark filters to WARN).
      "logInfo" -> org.apache.spark.ttlstate.SparkConsole.showsInfo(TtlStateStoreProvider.log.isInfoEnabled).toString,
      "checkpointIds" -> checkpointIds.toString,
      // No streaming query: the state data source (or an offline tool) reads this store.
      "stateReader" -> queryRun.isEmpty.toString) ++
      operatorName.map(n => "operatorName" -> Json.str(n)) ++
      QueryIdentity.forStateRoot(stateStoreId.checkpointRootLocation, hadoopConf).map(q => "queryId" -> Json.str(q))

  override def stateStoreId: StateStoreId = id

  private[ttlstate] def label: String =
    s"ttlstate store (operator ${id.operatorId}, partition ${id.partitionId}, store ${id.storeName})"

  private def workerOf(server: RunningServer): Int = Math.floorMod(providerKey.hashCode, server.sockets.size)

  /** Runs `f` with a connection to this store's worker and its server-side handle, starting
   *  the server if needed. */
  private[ttlstate] def withConnection[T](keep: Boolean)(f: (ServerConnection, Int, Int) => T): T =
    withServerConnection(launch.server(), keep)(f)

  private def withServerConnection[T](server: RunningServer, keep: Boolean)(
      f: (ServerConnection, Int, Int) => T): T = {
    val worker = workerOf(server)
    val conn = server.borrow(worker, launch.timeoutNanos)
    var ok = false
    try {
      val handle = synchronized {
        if (opened._1 != server.generation) {
          val w = new PayloadWriter().str(providerKey).str(openJson._1).str(openJson._2)
          val r = conn.call(w.frame(Protocol.OP_OPEN), files)
          opened = (server.generation, r.u32())
          readsCacheable = r.u8() == 1
          keyFilterAllowed = r.u8() == 1
          ttlMs = r.i64()
          updateOnRead = r.u8() == 1
          if (TtlStateStoreProvider.log.isInfoEnabled) {
            val ttl = if (ttlMs < 0) "TTL off" else
              s"TTL ${TtlStateStoreProvider.duration(ttlMs)} (${if (updateOnRead) "OnReadAndWrite" else "OnCreateAndWrite"})"
            TtlStateStoreProvider.log.info(s"ttlstate store (operator ${id.operatorId}" +
              s"${operatorName.map(n => s" $n").getOrElse("")}, partition ${id.partitionId}, store " +
              s"${id.storeName}) opened on ttlstate state server pid ${server.pid} (#${server.generation} " +
              s"in this JVM), worker $worker of ${server.sockets.size}: $ttl")
          }
        }
        opened._2
      }
      val result = f(conn, handle, worker)
      ok = true
      result
    } finally {
      if (!ok || !keep) server.giveBack(conn, worker)
    }
  }

  private[ttlstate] def errorFor(what: String, version: Long, e: Throwable): Throwable = e match {
    case s: ServerError =>
      new IllegalStateException(s"$label, version $version: $what failed: ${s.message}", s)
    case d: ServerDied => new IllegalStateException(s"$label, version $version: $what failed: ${d.getMessage}", d)
    case l: ConnectionLost => new IllegalStateException(s"$label, version $version: $what failed: ${l.getMessage}", l)
    case other => other
  }

  /** `empty`: an empty store at `version` (Spark's loadEmpty); `fromSnapshot`: `version` rebuilt
   *  from exactly that snapshot version plus the changelogs after it (fine-grained replay). */
  private def openStore(version: Long, readOnly: Boolean, ckptId: Option[String], empty: Boolean = false,
      fromSnapshot: Option[Long] = None, snapshotCkptId: Option[String] = None): TtlStateStore = {
    val clock = BatchTime.forVersion(id.checkpointRootLocation, version, runId, hadoopConf)
    val flags = (if (readOnly) Protocol.LOAD_READ_ONLY else 0) | (if (empty) Protocol.LOAD_EMPTY else 0) |
      (if (fromSnapshot.isDefined) Protocol.LOAD_FROM_SNAPSHOT else 0) |
      (if (checkpointIds) Protocol.LOAD_CHECKPOINT_ID else 0)
    try {
      withConnection(keep = true) { (conn, handle, worker) =>
        // On failure withConnection returns the connection to the pool (exactly once).
        val started = System.nanoTime()
        val hashes = if (mayBuildKeyFilter(readOnly)) Protocol.LOAD_KEY_HASHES else 0
        val w = new PayloadWriter().u32(handle).i64(version).i64(clock.timestampMs).u8(flags | hashes)
        fromSnapshot.foreach(w.i64)
        w.i64(clock.watermarkMs).i64(clock.previousTimestampMs)
        if (checkpointIds) w.str(ckptId.getOrElse("")).str(snapshotCkptId.getOrElse(""))
        val r = conn.call(w.frame(Protocol.OP_LOAD), files)
        val loaded = LoadedVersion(opened._1, handle, r.i64(), r.i64(), r.i64())
        val keyHashes = r.u8()
        val store = new TtlStateStore(this, conn, worker, handle, version, readOnly, codec, valueSchema.length,
          files, loaded)
        attachKeyFilter(store, restoredKeyBits(conn, handle, loaded.lineage), keyHashes)
        store.loadNanos = System.nanoTime() - started
        attachCache(store)
        ReadAhead.opened(store)
        store
      }
    } catch {
      case e: Throwable => throw errorFor("load", version, e)
    }
  }

  override def getStore(version: Long, stateStoreCkptId: Option[String], forceSnapshotOnCommit: Boolean,
      loadEmpty: Boolean): StateStore = {
    // forceSnapshotOnCommit is not honoured: Spark sets it for a store that never reported a
    // snapshot upload to its coordinator, and that report is a Spark-internal API, so it would
    // be set on every batch and rewrite the whole state each time. Snapshots follow
    // snapshotInterval through maintenance instead.
    openStore(version, readOnly = false, stateStoreCkptId, empty = loadEmpty)
  }

  // -- SupportsFineGrainedReplay: the state data source's snapshotStartBatchId and readChangeFeed

  override def replayStateFromSnapshot(snapshotVersion: Long, endVersion: Long, readOnly: Boolean,
      snapshotVersionStateStoreCkptId: Option[String], endVersionStateStoreCkptId: Option[String]): StateStore =
    openStore(endVersion, readOnly, endVersionStateStoreCkptId, fromSnapshot = Some(snapshotVersion),
      snapshotCkptId = snapshotVersionStateStoreCkptId)

  override def replayReadStateFromSnapshot(snapshotVersion: Long, endVersion: Long,
      snapshotVersionStateStoreCkptId: Option[String], endVersionStateStoreCkptId: Option[String]): ReadStateStore =
    openStore(endVersion, readOnly = true, endVersionStateStoreCkptId, fromSnapshot = Some(snapshotVersion),
      snapshotCkptId = snapshotVersionStateStoreCkptId)

  /** The changes of versions `startVersion..endVersion`, read from our changelogs (verified
   *  whole and bound to this store by the server): puts and deletes with batch id version - 1,
   *  values without the TTL timestamp, as Spark's own providers report them. Deletes include
   *  those TTL made (expired on read, incremental cleanup); the compaction filter's are not in
   *  changelogs. */
  override def getStateStoreChangeDataReader(startVersion: Long, endVersion: Long,
      colFamilyNameOpt: Option[String], endVersionStateStoreCkptId: Option[String])
      : NextIteratorBridge[(RecordType.Value, UnsafeRow, UnsafeRow, Long)] = {
    colFamilyNameOpt.filter(_ != StateStore.DEFAULT_COL_FAMILY_NAME).foreach { cf =>
      throw StateStoreErrors.unsupportedOperationException(s"column family $cf", "TtlStateStoreProvider")
    }
    if (startVersion < 1 || endVersion < startVersion) {
      throw new IllegalArgumentException(s"$label: no change feed from version $startVersion to $endVersion")
    }
    new ChangeFeed(startVersion, endVersion, endVersionStateStoreCkptId.filter(_ => checkpointIds))
  }

  /** On checkpoint format 2 (`endId`), the changelog of each version is the one on the lineage of
   *  the end version's id. */
  private final class ChangeFeed(startVersion: Long, endVersion: Long, endId: Option[String])
      extends NextIteratorBridge[(RecordType.Value, UnsafeRow, UnsafeRow, Long)] {
    private var version = startVersion - 1
    private var borrowed: (ServerConnection, Int, Int) = _  // connection, handle, worker
    private var reader: PayloadReader = _
    private var iterId = 0
    private var remaining = 0
    private var done = true

    private def call(frame: Array[Byte]): PayloadReader =
      try borrowed._1.call(frame, files) catch { case e: Throwable => throw errorFor("change feed", version, e) }

    private def header(): Unit = { done = reader.u8() == 1; remaining = reader.u32() }

    override protected def getNext(): (RecordType.Value, UnsafeRow, UnsafeRow, Long) = {
      while (remaining == 0) {
        if (!done) {
          reader = call(new PayloadWriter().u32(borrowed._2).u32(iterId).frame(Protocol.OP_ITER_NEXT))
          header()
        } else if (version < endVersion) {
          version += 1
          if (borrowed == null) {
            borrowed = try withConnection(keep = true)((c, h, w) => (c, h, w)) catch {
              case e: Throwable => throw errorFor("change feed", version, e)
            }
          }
          reader = call(new PayloadWriter().u32(borrowed._2).i64(version).i64(endVersion)
            .str(endId.getOrElse("")).frame(Protocol.OP_CHANGES))
          iterId = reader.u32()
          header()
        } else {
          end()
          return null
        }
      }
      remaining -= 1
      val key = codec.decode(reader.bytesOrNull())
      val stored = reader.bytesOrNull()
      if (stored == null) (RecordType.DELETE_RECORD, key, null, version - 1)
      else {
        val row = new UnsafeRow(valueSchema.length)
        val bytes = java.util.Arrays.copyOfRange(stored, 8, stored.length)
        row.pointTo(bytes, bytes.length)
        (RecordType.PUT_RECORD, key, row, version - 1)
      }
    }

    override protected def close(): Unit = if (borrowed != null) {
      val (conn, handle, worker) = borrowed
      borrowed = null
      if (!done && !conn.broken) {
        try conn.call(new PayloadWriter().u32(handle).u32(iterId).frame(Protocol.OP_ITER_CLOSE), files)
        catch { case _: Exception => }
      }
      conn.server.giveBack(conn, worker)
    }
  }

  override def getReadStore(version: Long, uniqueId: Option[String]): ReadStateStore =
    openStore(version, readOnly = true, uniqueId)

  override def upgradeReadStoreToWriteStore(readStore: ReadStateStore, version: Long, uniqueId: Option[String],
      forceSnapshotOnCommit: Boolean): StateStore = readStore match {
    case s: TtlStateStore if s.version == version && s.isOpen => s.upgrade()
    case _ => getStore(version, uniqueId, forceSnapshotOnCommit, loadEmpty = false)
  }

  private def mayBuildKeyFilter(readOnly: Boolean): Boolean =
    !readOnly && keyFilterAllowed && keyFilterMaxKeys > 0 && keyFilterMaxBytes > 0

  /** The bits of a filter layer of 2^bitsLog2 bits that the server set from the hashes it kept
   *  of every key of `version` of `lineage`, which a load built from nothing (null if it kept
   *  none for that version; empty while it still scans them). */
  private def restoredKeyBits(conn: ServerConnection, handle: Int, lineage: Long)(version: Long,
      bitsLog2: Int): Array[Byte] =
    conn.call(new PayloadWriter().u32(handle).i64(lineage).i64(version).u8(bitsLog2).u8(KeyFilter.Hashes)
      .frame(Protocol.OP_KEY_FILTER_BITS), files).bytesOrNull()

  /** Gives `store` the key filter of its version: the kept one when it still describes exactly
   *  this version of the server's lineage (and has not grown past `keyFilter.maxKeys`), else
   *  (write stores of small enough stores, while the executor's `keyFilter.maxBytes` has room)
   *  a new one. `hashes` is what the load said of the server's hashes of the version's keys
   *  (OP_LOAD): kept (the server just rebuilt the local DB from the checkpoint), the new
   *  filter takes their bits; being scanned, it lacks them until a later load finds the scan
   *  done and merges them (`restoredKeyBits`); none, one scan of the keys fills it. Read-only
   *  stores never pay for a scan: the state data source reads once, and an operator's read
   *  store builds it when upgraded. */
  private[ttlstate] def attachKeyFilter(store: TtlStateStore,
      restoredKeyBits: (Long, Int) => Array[Byte] = null, hashes: Int = Protocol.KEY_HASHES_NONE): Unit = {
    KeyFilter.setBudget(keyFilterMaxBytes)
    val l = store.loaded
    val kept = keyFilter
    if (kept != null && kept.matches(l.generation, l.handle, l.lineage, store.version)) {
      val lacking = kept.lackingVersion
      if (lacking < 0 || restoredKeyBits == null) store.keyFilter = kept
      else {
        val bits = restoredKeyBits(lacking, kept.firstLayerBitsLog2)
        if (bits == null) { kept.close(); keyFilter = null; attachKeyFilter(store) } // gone: scan the keys
        else {
          if (bits.nonEmpty) kept.mergeFirstLayer(bits, l.numKeys) // empty: not scanned yet
          store.keyFilter = kept
        }
      }
    } else if (mayBuildKeyFilter(store.isReadOnly) && l.numKeys <= keyFilterMaxKeys) {
      if (kept != null) kept.close()
      keyFilter = null
      val fresh = KeyFilter.sized(l.generation, l.handle, l.lineage, l.numKeys, keyFilterMaxKeys, label)
      if (fresh.active) {
        if (hashes == Protocol.KEY_HASHES_SCANNING && restoredKeyBits != null) fresh.lackKeysOf(store.version)
        else {
          val bits = if (hashes == Protocol.KEY_HASHES_READY && restoredKeyBits != null) {
            restoredKeyBits(store.version, fresh.firstLayerBitsLog2)
          } else null
          if (bits == null) store.scanKeys(fresh.add)
          else if (bits.isEmpty) fresh.lackKeysOf(store.version)
          else fresh.fillFirstLayer(bits, l.numKeys)
        }
        fresh.version = store.version
        keyFilter = fresh
        store.keyFilter = fresh
      }
    }
  }

  /** Gives `store` the executor's cross-batch cache when it is exact for this store: reads are
   *  cacheable (expired values are never returned) and every access need not reach the server
   *  (no per-record incremental cleanup). The view is renewed unless it still describes exactly
   *  this version of the server's lineage. */
  private[ttlstate] def attachCache(store: TtlStateStore): Unit = {
    HotCache.setLimit(cacheMaxBytes)
    if (cacheMaxBytes > 0 && readsCacheable && keyFilterAllowed) {
      val l = store.loaded
      cacheView.attach(l.generation, l.handle, l.lineage, store.version, l.now)
      store.cache = cacheView
      store.cacheEpoch = cacheView.epoch
    }
  }

  /** A commit through `f` from version `from` makes it the filter of version `to`. */
  private[ttlstate] def keyFilterCommitted(f: KeyFilter, from: Long, to: Long): Unit = synchronized {
    if ((keyFilter eq f) && f.version == from) f.version = to
  }

  private[ttlstate] def commitStateStoreId: StateStoreId = id
  private[ttlstate] def commitValidation: Boolean = storeConf.commitValidationEnabled
  private[ttlstate] def hadoop: Configuration = hadoopConf

  /** Maintenance runs on Spark's threads, possibly after the application ended: it uses the
   *  running server of the generation this store was opened on, and never starts one. */
  private def maintenance(code: Int, extra: PayloadWriter => PayloadWriter): Unit = {
    if (id == null) return
    StateServer.running.filter(_.generation == opened._1).foreach { server =>
      withServerConnection(server, keep = false) { (conn, handle, _) =>
        conn.call(extra(new PayloadWriter().u32(handle)).frame(code), files)
      }
    }
  }

  override def doSnapshotMaintenance(): Unit = maintenance(Protocol.OP_SNAPSHOT, identity)

  override def doCleanupMaintenance(): Unit =
    maintenance(Protocol.OP_CLEANUP, _.i32(storeConf.minVersionsToRetain))

  override def doMaintenance(): Unit = {
    doSnapshotMaintenance()
    doCleanupMaintenance()
  }

  override def close(): Unit = synchronized {
    try maintenance(Protocol.OP_CLOSE, identity)
    catch { case _: Exception => } // closing must not fail the executor
    HotCache.removeOwner(cacheView.owner)
    val kept = keyFilter
    if (kept != null) kept.close()
    keyFilter = null
    opened = (-1L, -1)
  }

  override def supportedCustomMetrics: Seq[StateStoreCustomMetric] = Metrics.all
}

object TtlStateStoreProvider {
  private[ttlstate] val log: org.slf4j.Logger = org.slf4j.LoggerFactory.getLogger(classOf[TtlStateStoreProvider])

  /** 1800000 -> "30m", as the server and the README write durations. */
  private[ttlstate] def duration(ms: Long): String =
    Seq("d" -> 86400000L, "h" -> 3600000L, "m" -> 60000L, "s" -> 1000L)
      .collectFirst { case (unit, size) if ms >= size && ms % size == 0 => s"${ms / size}$unit" }
      .getOrElse(s"${ms}ms")
}

/** What the server said when it loaded a version: which local DB (`lineage`), its key count, and
 *  the time its TTL uses for this version (`now`). */
private[ttlstate] final case class LoadedVersion(generation: Long, handle: Int, lineage: Long, numKeys: Long, now: Long)
