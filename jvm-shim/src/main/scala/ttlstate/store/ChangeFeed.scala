package ttlstate.store

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import ttlstate.client.{CheckpointFiles, PayloadReader, PayloadWriter, Protocol, ServerConnection}
import ttlstate.spark.BuiltFor

/** One change of a store, in Spark's batch `batchId`: `kind` Protocol.CHANGE_PUT (of `value`),
 *  CHANGE_APPEND (of `value`: a ListState's appended value) or CHANGE_DELETE (`value` null). */
final case class Change(key: UnsafeRow, value: UnsafeRow, batchId: Long, kind: Int)

/** The changes of versions `startVersion..endVersion`, read from the store's changelogs (verified
 *  whole and bound to this store by the server): puts, appends and deletes with batch id
 *  version - 1, values without the TTL timestamp, as Spark's own providers report them. A store
 *  with column families logs every write in the order made, as Spark's RocksDB provider does;
 *  another store's changelog holds a batch's last write of each key. Deletes include those TTL
 *  made (expired on read, incremental cleanup); the compaction filter's are not in changelogs.
 *  `family` (a store with column families): the server sends that family's records only,
 *  decoded by its `layout`; "": every record, by the store's own. `multiValues` (a ListState's
 *  family): a record's value is a list, reported as Spark's line does (`BuiltFor`): from 4.3 a
 *  change per value, the first of the record's kind, the others appends; before, its first value.
 *  The state data source's `readChangeFeed` reads it through Spark's iterator. */
final class ChangeFeed private[store] (core: ProviderCore, files: CheckpointFiles, startVersion: Long,
    endVersion: Long, endId: Option[String], family: String, layout: RowLayout, multiValues: Boolean = false) {
  private val codec = layout.codec
  private val numValueFields = layout.numValueFields
  private var listValues: Iterator[UnsafeRow] = Iterator.empty // a list's values after the first
  private var listKey: UnsafeRow = _
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
    if (listValues.hasNext) return Change(listKey, listValues.next(), version - 1, Protocol.CHANGE_APPEND)
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
    val stored = reader.bytesOrNull() // u8 kind, then the TtlValue; null: a delete
    if (stored == null) return Change(key, null, version - 1, Protocol.CHANGE_DELETE)
    val kind = stored(0).toInt
    val bytes = java.util.Arrays.copyOfRange(stored, 1 + 8, stored.length) // after the kind and the timestamp
    if (multiValues) {
      val values = MultiValues.rows(bytes, numValueFields)
      val first = if (values.hasNext) values.next() else null
      if (BuiltFor.LIST_CHANGE_EVERY_VALUE) { listKey = key; listValues = values }
      Change(key, first, version - 1, kind)
    } else {
      val row = new UnsafeRow(numValueFields)
      row.pointTo(bytes, bytes.length)
      Change(key, row, version - 1, kind)
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
