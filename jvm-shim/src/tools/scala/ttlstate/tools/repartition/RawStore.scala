package ttlstate.tools.repartition

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.execution.streaming.state.StateStoreId
import org.apache.spark.sql.types.{DataType, StructType}
import ttlstate.client.{CheckpointFiles, PayloadReader, PayloadWriter, Protocol, ServerConnection}
import ttlstate.spark.MetricNames
import ttlstate.store.{KeyCodec, ProviderCore, StoreSpec}

/** One store on this executor's state server, as `ttlstate repartition` uses it: a version's
 *  entries read as stored (key, TtlValue: OP_ENTRIES), or whole TtlValues written into a store
 *  loaded empty (WRITE_PUT_ENTRY) and committed. The store is opened through the shim's
 *  `ProviderCore` (the same OPEN as a provider's, so the server finds its checkpoint folder, query
 *  and operator as for a query), then held on one connection until `close`. */
final class RawStore(root: String, group: StoreGroup, partition: Int, confs: Map[String, String],
    hadoopConf: Configuration, checkpointIds: Boolean) extends AutoCloseable {
  private val id = StateStoreId(root, group.operatorId, partition, group.storeName)
  private val keySchema = DataType.fromJson(group.keySchemaJson).asInstanceOf[StructType]
  private val core = new ProviderCore(StoreSpec(id, keySchema,
    DataType.fromJson(group.valueSchemaJson).asInstanceOf[StructType], KeyCodec(group.numColsPrefixKey, keySchema),
    confs, hadoopConf, checkpointIds = checkpointIds, minVersionsToRetain = 1, commitValidation = false,
    columnFamilies = group.route == Route.Families))
  private val files = new CheckpointFiles(new Path(id.storeCheckpointLocation().toString), hadoopConf)
  private var borrowed: (ServerConnection, Int, Int) = core.withConnection(keep = true)((c, h, w) => (c, h, w))
  private def handle: Int = borrowed._2

  val label: String = s"operator ${group.operatorId}, partition $partition, store ${group.storeName}"

  private def call(what: String, frame: Array[Byte]): PayloadReader =
    try borrowed._1.call(frame, files) catch {
      case e: Throwable => throw new IllegalStateException(s"$label ($root): $what failed: ${e.getMessage}", e)
    }

  /** Loads `version` (or, `empty`, an empty store at it whose commit makes version + 1) for a batch
   *  of timestamp `nowMs`; on checkpoint format 2 the attempt `ckptId` of it; returns its number
   *  of keys. */
  def load(version: Long, nowMs: Long, readOnly: Boolean, empty: Boolean, ckptId: String = ""): Long = {
    val flags = (if (readOnly) Protocol.LOAD_READ_ONLY else 0) | (if (empty) Protocol.LOAD_EMPTY else 0) |
      (if (checkpointIds) Protocol.LOAD_CHECKPOINT_ID else 0)
    val w = new PayloadWriter().u32(handle).i64(version).i64(nowMs).u8(flags).i64(0L).i64(-1L)
    if (checkpointIds) w.str(ckptId).str("")
    val r = call("load", w.frame(Protocol.OP_LOAD))
    r.i64() // lineage
    r.i64()
  }

  /** The loaded version's entries as stored, in key order, streamed chunk by chunk. */
  def entries(): Iterator[(Array[Byte], Array[Byte])] = new Iterator[(Array[Byte], Array[Byte])] {
    private var reader = call("read", new PayloadWriter().u32(handle).frame(Protocol.OP_ENTRIES))
    private val iterId = reader.u32()
    private var done = false
    private var remaining = 0
    header()

    private def header(): Unit = { done = reader.u8() == 1; remaining = reader.u32() }

    def hasNext: Boolean = {
      while (remaining == 0 && !done) {
        reader = call("read", new PayloadWriter().u32(handle).u32(iterId).frame(Protocol.OP_ITER_NEXT))
        header()
      }
      remaining > 0
    }

    def next(): (Array[Byte], Array[Byte]) = {
      if (!hasNext) throw new NoSuchElementException(label)
      remaining -= 1
      (reader.bytesOrNull(), reader.bytesOrNull())
    }
  }

  /** Pipelines `count` writes already encoded as OP_WRITES records (`records`: WRITE_PUT_ENTRY,
   *  key, TtlValue each): no reply, an error surfaces at the next call. */
  def write(count: Int, records: PayloadWriter): Unit =
    try borrowed._1.send(Protocol.OP_WRITES, new PayloadWriter(8).u32(handle).u32(count), records) catch {
      case e: Throwable => throw new IllegalStateException(s"$label ($root): write failed: ${e.getMessage}", e)
    }

  /** Commits the loaded version; returns (new version, every key of it, its checkpoint id: "" on
   *  format 1). A store with column families reports its user families' keys as its rows and its
   *  internal ones' as a metric: both count. */
  def commit(): (Long, Long, String) = {
    val r = call("commit", new PayloadWriter().u32(handle).frame(Protocol.OP_COMMIT))
    val version = r.i64()
    val rows = r.i64()
    r.i64() // memory
    val metrics = (0 until r.u32()).map(_ => r.str() -> r.i64()).toMap // the store's metrics
    (version, rows + metrics.getOrElse(MetricNames.INTERNAL_FAMILY_KEYS, 0L), r.str())
  }

  def close(): Unit = {
    val (conn, _, worker) = borrowed
    if (conn != null) {
      borrowed = (null, handle, worker)
      conn.server.giveBack(conn, worker)
    }
    core.close() // OP_CLOSE: the server drops the store and its local copy
  }
}
