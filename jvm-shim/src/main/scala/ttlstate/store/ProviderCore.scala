package ttlstate.store

import java.util.UUID

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.TaskContext
import org.apache.spark.sql.execution.streaming.state.StateStoreId
import org.apache.spark.sql.types.StructType
import org.slf4j.LoggerFactory
import ttlstate.cache.{CacheView, HotCache, KeyFilter}
import ttlstate.client.{CheckpointFiles, ConnectionLost, Json, PayloadReader, PayloadWriter, Protocol, RangeService, ServerConnection, ServerDied, ServerError}
import ttlstate.conf.{ConfKeys, ConfValues, ShimConfs}
import ttlstate.metadata.{BatchTime, OperatorNames, QueryIdentity}
import ttlstate.server.{RunningServer, ServerLaunch, StateServer}

/** What a Spark version's provider adapter hands over at `init`, in Spark-neutral terms.
 *  `columnFamilies`: the store has column families (transformWithState's), whose state expires by
 *  Spark's `TTLConfig` only: the server gives it no TTL of its own.
 *  `snapshotPublished`: told the version of each snapshot maintenance published (Spark 4.1+
 *  reports it to its state store coordinator, which watches for stores whose snapshots lag). */
final case class StoreSpec(id: StateStoreId, keySchema: StructType, valueSchema: StructType, codec: KeyCodec,
    sqlConfs: Map[String, String], hadoopConf: Configuration, checkpointIds: Boolean, minVersionsToRetain: Int,
    commitValidation: Boolean, snapshotPublished: Long => Unit = _ => (), columnFamilies: Boolean = false)

/** How a version is loaded (OP_LOAD's flags and ids). `fromSnapshot`: rebuilt from exactly that
 *  snapshot version plus the changelogs after it (the state data source's fine-grained replay).
 *  `forceSnapshot`: Spark's forceSnapshotOnCommit (4.2+, for a store its coordinator found
 *  lagging): the next maintenance snapshots the store whatever `snapshotInterval` says. */
final case class LoadRequest(version: Long, readOnly: Boolean, ckptId: Option[String] = None, empty: Boolean = false,
    fromSnapshot: Option[Long] = None, snapshotCkptId: Option[String] = None, forceSnapshot: Boolean = false)

/** What the server said when it loaded a version: which local DB (`lineage`), its key count, and
 *  the time its TTL uses for this version (`now`). */
final case class LoadedVersion(generation: Long, handle: Int, lineage: Long, numKeys: Long, now: Long)

/** One provider instance's store, whatever the Spark version: opening it on the executor's state
 *  server, loading versions, the key filter and the cross-batch cache it keeps across versions,
 *  maintenance and close. Spark's API (`TtlStateStoreProvider`, one per Spark line) maps onto it.
 *
 *  Nothing starts before the first load: Spark creates providers on the driver just to read
 *  their metrics. */
final class ProviderCore(val spec: StoreSpec) {
  import ProviderCore.log

  val id: StateStoreId = spec.id
  private val files = new CheckpointFiles(new Path(id.storeCheckpointLocation().toString), spec.hadoopConf)
  private val confs = spec.sqlConfs.filter(_._1.startsWith(ConfKeys.PREFIX))
  private val launch = ServerLaunch.of(confs)
  private val shim = ShimConfs.of(confs)
  // A streaming query's tasks carry its query id as a local property; the state data source's
  // tasks do not (their Hadoop conf may still hold a run id copied from the session's SQL conf,
  // which must not make a reader share the running query's stores). Spark 4 also gives the
  // stores the query's run id in their Hadoop conf; Spark 3.5 does not, and there a provider
  // instance (Spark makes one per store and query run) stands for its run.
  private val taskQueryId = Option(TaskContext.get()).flatMap(t => Option(t.getLocalProperty("sql.streaming.queryId")))
  private val queryRun = Option(spec.hadoopConf.get("sql.streaming.runId"))
    .filter(_ => TaskContext.get() == null || taskQueryId.isDefined)
  private val runId = queryRun.getOrElse(UUID.randomUUID().toString)
  private val inQuery = queryRun.isDefined || taskQueryId.isDefined
  private val providerKey = Seq(id.checkpointRootLocation, id.operatorId, id.partitionId, id.storeName, runId).mkString("|")
  // The names of the query's operators (`operator.<name>.ttl`, and the logs), from Spark's state metadata.
  private val operatorNames = OperatorNames.of(id.checkpointRootLocation, queryRun, spec.hadoopConf)
  private val operatorName = operatorNames.get(id.operatorId)
  // Lazy: built at the first OPEN, which may start the range service (`openInfo`).
  private lazy val openJson = (Json.obj(confs.toSeq.map { case (k, v) => k -> Json.str(v) }), Json.obj(openInfo))

  // Set by OPEN: (server generation, handle) and how the server applies TTL to this store.
  @volatile private var opened: (Long, Int) = (-1L, -1)
  @volatile private var rules = TtlRules(-1L, updateOnRead = false, cacheable = false)
  @volatile private var keyFilterAllowed = false
  @volatile private var keyFilter: KeyFilter = null
  private lazy val cacheView = new CacheView(HotCache.newOwner())
  // What the last committed task of this store learned (see TaskHint).
  @volatile private[store] var taskHint: TaskHint = TaskHint.None
  // A load asked for a snapshot whatever the interval (LoadRequest.forceSnapshot).
  @volatile private var snapshotForced = false

  StateServer.watchApplication()

  /** Real-time Mode: how often a loaded version's "now" advances to the wall clock; -1: never. */
  def clockIntervalMs: Long = shim.clockIntervalMs
  def label: String = s"ttlstate store (operator ${id.operatorId}, partition ${id.partitionId}, store ${id.storeName})"

  /** What the server is told about the store at OPEN, besides the confs. */
  private def openInfo: Seq[(String, String)] =
    Seq(
      "operatorId" -> id.operatorId.toString,
      "partitionId" -> id.partitionId.toString,
      "storeName" -> Json.str(id.storeName),
      "checkpointDir" -> Json.str(id.storeCheckpointLocation().toString),
      "keySchema" -> Json.str(spec.keySchema.json),
      "valueSchema" -> Json.str(spec.valueSchema.json),
      "operatorNames" -> OperatorNames.json(operatorNames),
      // The server logs each store it opens at INFO when the executor's log shows INFO (not the
      // console of a local session, which Spark filters to WARN).
      "logInfo" -> org.apache.spark.ttlstate.SparkConsole.showsInfo(log.isInfoEnabled).toString,
      "checkpointIds" -> spec.checkpointIds.toString,
      "columnFamilies" -> spec.columnFamilies.toString,
      // No streaming query: the state data source (or an offline tool) reads this store.
      "stateReader" -> (!inQuery).toString) ++
      operatorName.map(n => "operatorName" -> Json.str(n)) ++
      files.localDirectory.map(d => "localCheckpointDir" -> Json.str(d)) ++
      rangeSocket.map(s => "rangeSocket" -> Json.str(s)) ++
      QueryIdentity.forStateRoot(id.checkpointRootLocation, spec.hadoopConf).map(q => "queryId" -> Json.str(q))

  /** The range service's socket, where the server reads this store's checkpoint through Hadoop
   *  (not itself: server/registry.py): restores read SST files in place, and snapshots written
   *  after their commit returned (outside any request) reach the checkpoint. */
  private def rangeSocket: Option[String] = {
    val wanted = ConfValues.flag(ConfKeys.SNAPSHOT_READ_IN_PLACE, confs) ||
      ConfValues.flag(ConfKeys.SNAPSHOT_AFTER_COMMIT, confs)
    if (!wanted || (files.localDirectory.isDefined && ConfValues.flag(ConfKeys.CHECKPOINT_LOCAL_FILES, confs))) None
    else Some(RangeService.socketFor(id.storeCheckpointLocation(), spec.hadoopConf))
  }

  private def workerOf(server: RunningServer): Int = Math.floorMod(providerKey.hashCode, server.sockets.size)

  /** Runs `f` with a connection to this store's worker and its server-side handle, starting the
   *  server if needed. With `keep`, the connection stays borrowed unless `f` fails. */
  def withConnection[T](keep: Boolean)(f: (ServerConnection, Int, Int) => T): T =
    withHandle(launch.server(), keep, mayOpen = true)(f).get

  /** `f` with this store's handle on `server`, opening the store there first if `mayOpen`; None
   *  (and `f` not run) when it is not open there and may not be. The check and the open are one
   *  step under this core's lock, so a close between them cannot be undone by a reopen. */
  private def withHandle[T](server: RunningServer, keep: Boolean, mayOpen: Boolean)(
      f: (ServerConnection, Int, Int) => T): Option[T] = {
    val worker = workerOf(server)
    val conn = server.borrow(worker, launch.timeoutNanos)
    var ok = false
    try {
      val handle = synchronized {
        if (opened._1 == server.generation) Some(opened._2)
        else if (mayOpen) { open(conn, server, worker); Some(opened._2) }
        else None
      }
      val result = handle.map(h => f(conn, h, worker))
      ok = true
      result
    } finally {
      if (!ok || !keep) server.giveBack(conn, worker)
    }
  }

  private def open(conn: ServerConnection, server: RunningServer, worker: Int): Unit = {
    val w = new PayloadWriter().str(providerKey).str(openJson._1).str(openJson._2)
    val r = conn.call(w.frame(Protocol.OP_OPEN), files)
    opened = (server.generation, r.u32())
    val cacheable = r.u8() == 1
    keyFilterAllowed = r.u8() == 1
    val ttlMs = r.i64()
    rules = TtlRules(ttlMs, updateOnRead = r.u8() == 1, cacheable)
    if (log.isInfoEnabled) {
      val ttl = if (ttlMs < 0) "TTL off" else
        s"TTL ${ProviderCore.duration(ttlMs)} (${if (rules.updateOnRead) "OnReadAndWrite" else "OnCreateAndWrite"})"
      log.info(s"ttlstate store (operator ${id.operatorId}${operatorName.map(n => s" $n").getOrElse("")}, " +
        s"partition ${id.partitionId}, store ${id.storeName}) opened on ttlstate state server pid ${server.pid} " +
        s"(#${server.generation} in this JVM), worker $worker of ${server.sockets.size}: $ttl")
    }
  }

  def errorFor(what: String, version: Long, e: Throwable): Throwable = e match {
    case s: ServerError => new IllegalStateException(s"$label, version $version: $what failed: ${s.message}", s)
    case d: ServerDied => new IllegalStateException(s"$label, version $version: $what failed: ${d.getMessage}", d)
    case l: ConnectionLost => new IllegalStateException(s"$label, version $version: $what failed: ${l.getMessage}", l)
    case other => other
  }

  /** Loads a version for one task. */
  /** The next maintenance snapshots the store whatever `snapshotInterval` says. */
  def forceSnapshot(): Unit = snapshotForced = true

  def load(req: LoadRequest): StoreVersion = {
    if (req.forceSnapshot) forceSnapshot()
    val clock = BatchTime.forVersion(id.checkpointRootLocation, req.version, runId, spec.hadoopConf)
    val flags = (if (req.readOnly) Protocol.LOAD_READ_ONLY else 0) | (if (req.empty) Protocol.LOAD_EMPTY else 0) |
      (if (req.fromSnapshot.isDefined) Protocol.LOAD_FROM_SNAPSHOT else 0) |
      (if (spec.checkpointIds) Protocol.LOAD_CHECKPOINT_ID else 0)
    try {
      withConnection(keep = true) { (conn, handle, worker) =>
        // On failure withConnection returns the connection to the pool (exactly once).
        val started = System.nanoTime()
        val hashes = if (mayBuildKeyFilter(req.readOnly)) Protocol.LOAD_KEY_HASHES else 0
        val w = new PayloadWriter().u32(handle).i64(req.version).i64(clock.timestampMs).u8(flags | hashes)
        req.fromSnapshot.foreach(w.i64)
        w.i64(clock.watermarkMs).i64(clock.previousTimestampMs)
        if (spec.checkpointIds) w.str(req.ckptId.getOrElse("")).str(req.snapshotCkptId.getOrElse(""))
        val r = conn.call(w.frame(Protocol.OP_LOAD), files)
        val loaded = LoadedVersion(opened._1, handle, r.i64(), r.i64(), r.i64())
        val keyHashes = r.u8()
        val channel = new StoreChannel(conn, worker, handle, files, shim.writeBatchBytes,
          (what, e) => errorFor(what, req.version, e))
        val store = new StoreVersion(this, channel, req.version, req.readOnly, loaded, rules, taskHint)
        attachKeyFilter(store, restoredKeyBits(conn, handle, loaded.lineage), keyHashes)
        store.loadNanos = System.nanoTime() - started
        attachCache(store)
        store
      }
    } catch {
      case e: Throwable => throw errorFor("load", req.version, e)
    }
  }

  private def mayBuildKeyFilter(readOnly: Boolean): Boolean =
    !readOnly && keyFilterAllowed && shim.keyFilterMaxKeys > 0 && shim.keyFilterMaxBytes > 0

  /** The bits of a filter layer of 2^bitsLog2 bits that the server set from the hashes it kept of
   *  every key of `version` of `lineage`, which a load built from nothing (null if it kept none
   *  for that version; empty while it still scans them). */
  private def restoredKeyBits(conn: ServerConnection, handle: Int, lineage: Long)(version: Long,
      bitsLog2: Int): Array[Byte] =
    conn.call(new PayloadWriter().u32(handle).i64(lineage).i64(version).u8(bitsLog2).u8(KeyFilter.Hashes)
      .frame(Protocol.OP_KEY_FILTER_BITS), files).bytesOrNull()

  /** Gives `store` the key filter of its version: the kept one when it still describes exactly
   *  this version of the server's lineage (and has not grown past `keyFilter.maxKeys`), else
   *  (write stores of small enough stores, while the executor's `keyFilter.maxBytes` has room) a
   *  new one. `hashes` is what the load said of the server's hashes of the version's keys
   *  (OP_LOAD): kept (the server just rebuilt the local DB from the checkpoint), the new filter
   *  takes their bits; being scanned, it lacks them until a later load finds the scan done and
   *  merges them (`restoredKeyBits`); none, one scan of the keys fills it. Read-only stores never
   *  pay for a scan: the state data source reads once, and an operator's read store builds it
   *  when upgraded. */
  private[store] def attachKeyFilter(store: StoreVersion, restoredKeyBits: (Long, Int) => Array[Byte] = null,
      hashes: Int = Protocol.KEY_HASHES_NONE): Unit = {
    KeyFilter.setBudget(shim.keyFilterMaxBytes)
    val l = store.loaded
    val kept = keyFilter
    if (kept != null && kept.matches(l.generation, l.handle, l.lineage, store.version)) {
      val lacking = kept.lackingVersion
      if (lacking < 0 || restoredKeyBits == null) store.reads.keyFilter = kept
      else {
        val bits = restoredKeyBits(lacking, kept.firstLayerBitsLog2)
        if (bits == null) { kept.close(); keyFilter = null; attachKeyFilter(store) } // gone: scan the keys
        else {
          if (bits.nonEmpty) kept.mergeFirstLayer(bits, l.numKeys) // empty: not scanned yet
          store.reads.keyFilter = kept
        }
      }
    } else if (mayBuildKeyFilter(store.isReadOnly) && l.numKeys <= shim.keyFilterMaxKeys) {
      if (kept != null) kept.close()
      keyFilter = null
      val fresh = KeyFilter.sized(l.generation, l.handle, l.lineage, l.numKeys, shim.keyFilterMaxKeys, label)
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
        store.reads.keyFilter = fresh
      }
    }
  }

  /** Gives `store` the executor's cross-batch cache when it is exact for this store: reads are
   *  cacheable (expired values are never returned) and every access need not reach the server
   *  (no per-record incremental cleanup). The view is renewed unless it still describes exactly
   *  this version of the server's lineage. */
  private def attachCache(store: StoreVersion): Unit = {
    HotCache.setLimit(shim.cacheMaxBytes)
    if (shim.cacheMaxBytes > 0 && rules.cacheable && keyFilterAllowed) {
      val l = store.loaded
      cacheView.attach(l.generation, l.handle, l.lineage, store.version, l.now)
      store.reads.cache = cacheView
      store.reads.cacheEpoch = cacheView.epoch
    }
  }

  /** A commit through `f` from version `from` makes it the filter of version `to`. */
  private[store] def keyFilterCommitted(f: KeyFilter, from: Long, to: Long): Unit = synchronized {
    if ((keyFilter eq f) && f.version == from) f.version = to
  }

  /** Maintenance runs on Spark's threads, possibly after the application ended, and in Spark 4.3
   *  apart from the unload that closes the store: it uses the running server of the generation
   *  this store was opened on, never starts one, and never opens the store (a maintenance call
   *  that raced `close` used to open it again, and that handle was never closed). */
  private def maintenance[T](code: Int, extra: PayloadWriter => PayloadWriter)(answer: PayloadReader => T): Option[T] =
    StateServer.running.filter(_.generation == opened._1).flatMap { server =>
      withHandle(server, keep = false, mayOpen = false) { (conn, handle, _) =>
        answer(conn.call(extra(new PayloadWriter().u32(handle)).frame(code), files))
      }
    }

  /** The snapshot when it is due (or forced: Spark's forceSnapshotOnCommit), reported once
   *  published. */
  def snapshotMaintenance(): Unit = {
    val forced = snapshotForced
    snapshotForced = false
    val published = try maintenance(if (forced) Protocol.OP_SNAPSHOT_NOW else Protocol.OP_SNAPSHOT, identity)(_.i64())
    catch { case e: Throwable => if (forced) snapshotForced = true; throw e }
    published.filter(_ >= 0).foreach(spec.snapshotPublished)
  }

  def cleanupMaintenance(): Unit = maintenance(Protocol.OP_CLEANUP, _.i32(spec.minVersionsToRetain))(identity)

  def close(): Unit = synchronized {
    try maintenance(Protocol.OP_CLOSE, identity)(identity)
    catch { case _: Exception => } // closing must not fail the executor
    HotCache.removeOwner(cacheView.owner)
    val kept = keyFilter
    if (kept != null) kept.close()
    keyFilter = null
    opened = (-1L, -1)
  }

  /** The changes of versions `from..to` (see ChangeFeed); on checkpoint format 2 (`endId`), each
   *  version's changelog is the one on the lineage of the end version's id. `family`: those of
   *  that column family only (its rows laid out by `layout`; `multiValues`: a ListState's, whose
   *  values are lists); None: every change, the store's rows. */
  def changes(from: Long, to: Long, endId: Option[String], family: Option[(String, RowLayout)] = None,
      multiValues: Boolean = false): ChangeFeed = {
    if (from < 1 || to < from) throw new IllegalArgumentException(s"$label: no change feed from version $from to $to")
    val (name, layout) = family.getOrElse(("", RowLayout(spec.codec, spec.valueSchema.length)))
    new ChangeFeed(this, files, from, to, endId.filter(_ => spec.checkpointIds), name, layout, multiValues)
  }
}

object ProviderCore {
  private[ttlstate] val log: org.slf4j.Logger = LoggerFactory.getLogger("ttlstate.spark.TtlStateStoreProvider")

  /** 1800000 -> "30m", as the server and the README write durations. */
  def duration(ms: Long): String =
    Seq("d" -> 86400000L, "h" -> 3600000L, "m" -> 60000L, "s" -> 1000L)
      .collectFirst { case (unit, size) if ms >= size && ms % size == 0 => s"${ms / size}$unit" }
      .getOrElse(s"${ms}ms")
}
