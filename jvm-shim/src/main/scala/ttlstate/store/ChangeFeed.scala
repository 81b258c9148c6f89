package ttlstate.store

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import ttlstate.client.{CheckpointFiles, PayloadReader, PayloadWriter, Protocol, ServerConnection}

/** One change of a store: a put (`value` non-null) or a delete of `key`, in Spark's batch `batchId`. */
final case class Change(key: UnsafeRow, value: UnsafeRow, batchId: Long)

/** The changes of versions `startVersion..endVersion`, read from the store's changelogs (verified
 *  whole and bound to this store by the server): puts and deletes with batch id version - 1,
 *  values without the TTL timestamp, as Spark's own providers report them. Deletes include those
 *  TTL made (expired on read, incremental cleanup); the compaction filter's are not in
 *  changelogs. `family` (a store with column families): the server sends that family's records
 *  only, decoded by its `layout`; "": every record, by the store's own. The state data source's
 *  `readChangeFeed` reads it through Spark's iterator. */
final class ChangeFeed private[store] (core: ProviderCore, files: CheckpointFiles, startVersion: Long,
    endVersion: Long, endId: Option[String], family: String, layout: RowLayout) {
  private val codec = layout.codec
  private val numValueFields = layout.numValueFields
  private var version = startVersion - 1
  private var borrowed: (ServerConnection, Int, Int) = _ // connection, handle, worker
  private var reader: PayloadReader = _
  private var iterId = 0
  private var remaining = 0
  private var done = true

  private def call(frame: Array[Byte]): PayloadReader =
    try borrowed._1.call(frame, files) catch { case e: Throwable => throw core.errorFor("change feed", version, e) }

  private def header(): Unit = { done = reader.u8() == 1; remaining = reader.u32() }

  /** The next change, or null after the last. */
  def next(): Change = {
    while (remaining == 0) {
      if (!done) {
        reader = call(new PayloadWriter().u32(borrowed._2).u32(iterId).frame(Protocol.OP_ITER_NEXT))
        header()
      } else if (version < endVersion) {
        version += 1
        if (borrowed == null) {
          borrowed = try core.withConnection(keep = true)((c, h, w) => (c, h, w)) catch {
            case e: Throwable => throw core.errorFor("change feed", version, e)
          }
        }
        reader = call(new PayloadWriter().u32(borrowed._2).i64(version).i64(endVersion)
          .str(endId.getOrElse("")).str(family).frame(Protocol.OP_CHANGES))
        iterId = reader.u32()
        header()
      } else return null
    }
    remaining -= 1
    val key = codec.decode(reader.bytesOrNull())
    val stored = reader.bytesOrNull()
    if (stored == null) Change(key, null, version - 1)
    else {
      val row = new UnsafeRow(numValueFields)
      val bytes = java.util.Arrays.copyOfRange(stored, 8, stored.length)
      row.pointTo(bytes, bytes.length)
      Change(key, row, version - 1)
    }
  }

  def close(): Unit = if (borrowed != null) {
    val (conn, handle, worker) = borrowed
    borrowed = null
    if (!done && !conn.broken) {
      try conn.call(new PayloadWriter().u32(handle).u32(iterId).frame(Protocol.OP_ITER_CLOSE), files)
      catch { case _: Exception => }
    }
    conn.server.giveBack(conn, worker)
  }
}
