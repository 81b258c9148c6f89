package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import ttlstate.store.{KeyCodec, MultiValues, StoreVersion}

/** Spark 4's StateStore over one loaded version (`StoreVersion`); `StoreApi` holds the methods
 *  whose signatures differ between 4.0 and 4.3, `FamilyStoreApi` the column family methods only
 *  some lines have. Each call names a column family (`ColumnFamilies`): a store without them has
 *  the default one only; transformWithState's stores have one per state variable, plus their
 *  timers' and TTL's, some with several values per key (`MultiValues`: ListState). */
final class TtlStateStore(val session: StoreVersion, provider: TtlStateStoreProvider)
    extends StateStore with StoreApi with FamilyStoreApi {
  override def id: StateStoreId = session.id
  override def version: Long = session.version

  private def family(cf: String): ColumnFamily = provider.families(cf)

  /** The values stored under `key` in the multi-valued family `f` (none: empty). */
  private def values(key: UnsafeRow, f: ColumnFamily): Iterator[UnsafeRow] =
    MultiValues.rows(session.getBytes(key, f.layout.codec), f.layout.numValueFields)

  override def get(key: UnsafeRow, colFamilyName: String): UnsafeRow = {
    val f = family(colFamilyName)
    if (f.multiValues) values(key, f).nextOption().orNull else session.get(key, f.layout)
  }

  private[spark] def multiGetRows(keys: Array[UnsafeRow], colFamilyName: String): Iterator[UnsafeRow] = {
    val f = family(colFamilyName)
    if (f.multiValues) keys.iterator.map(get(_, colFamilyName)) else session.multiGet(keys, f.layout)
  }

  override def valuesIterator(key: UnsafeRow, colFamilyName: String): Iterator[UnsafeRow] =
    values(key, family(colFamilyName))

  /** The entries of `f` whose stored keys start with `prefix`, from `from` (inclusive) until
   *  `until` (exclusive; null: no bound), in key order: one pair per key (its first value in a
   *  multi-valued family), or with `everyValue` one per value. `keyByKey`: a prefix scan of one
   *  grouping key's entries, which the task's copy of the family answers once it has one. */
  private def pairs(what: String, f: ColumnFamily, prefix: Array[Byte], everyValue: Boolean,
      from: Array[Byte] = null, until: Array[Byte] = null, keyByKey: Boolean = false): StateStoreIterator[UnsafeRowPair] = {
    val entries = if (keyByKey) session.prefixEntries(what, f.layout.codec.scope, prefix) else session.entries(what, prefix)
    val scan = new FamilyScan(entries, from, until)
    val numFields = f.layout.numValueFields
    val rows: Iterator[UnsafeRowPair] = if (!f.multiValues) scan.map { case (k, v) =>
      new UnsafeRowPair(f.layout.codec.decode(k), valueRow(v, numFields))
    } else scan.flatMap { case (k, v) =>
      val key = f.layout.codec.decode(k)
      val all = MultiValues.rows(v, numFields)
      (if (everyValue) all else all.take(1)).map(new UnsafeRowPair(key, _))
    }
    new StateStoreIterator(rows, () => scan.close())
  }

  private def valueRow(bytes: Array[Byte], numFields: Int): UnsafeRow = {
    val row = new UnsafeRow(numFields)
    row.pointTo(bytes, bytes.length)
    row
  }

  private def all(what: String, colFamilyName: String, everyValue: Boolean): StateStoreIterator[UnsafeRowPair] = {
    val f = family(colFamilyName)
    pairs(what, f, f.layout.codec.scope, everyValue)
  }

  private def withPrefix(what: String, prefixKey: UnsafeRow, colFamilyName: String,
      everyValue: Boolean): StateStoreIterator[UnsafeRowPair] = {
    val f = family(colFamilyName)
    pairs(what, f, f.layout.codec.scanPrefix(prefixKey), everyValue, keyByKey = true)
  }

  override def iterator(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = all("iterator", colFamilyName, false)
  override def prefixScan(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    withPrefix("prefixScan", prefixKey, colFamilyName, everyValue = false)
  def iteratorWithMultiValues(colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    all("iteratorWithMultiValues", colFamilyName, everyValue = true)
  def prefixScanWithMultiValues(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    withPrefix("prefixScanWithMultiValues", prefixKey, colFamilyName, everyValue = true)

  /** The entries of a family from key `start` (inclusive, None: its first) until key `end`
   *  (exclusive, None: its last), in the order of Spark's encoding of its keys, as Spark's
   *  RocksDB provider ranges them (`FamilyStoreApi`'s `rangeScan`, on the lines that have it). */
  private[spark] def rangeRows(start: Option[UnsafeRow], end: Option[UnsafeRow], colFamilyName: String,
      everyValue: Boolean): StateStoreIterator[UnsafeRowPair] = {
    val f = family(colFamilyName)
    pairs("rangeScan", f, f.layout.codec.scope, everyValue, start.map(f.layout.codec.encode).orNull,
      end.map(f.layout.codec.encode).orNull)
  }

  override def put(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = {
    val f = family(colFamilyName)
    if (!f.multiValues) session.put(key, value, f.layout)
    else putList(key, Array(value), colFamilyName)
  }

  override def remove(key: UnsafeRow, colFamilyName: String): Unit = session.remove(key, family(colFamilyName).layout)

  def putList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit =
    session.putBytes(key, MultiValues.encode(values.toSeq.map(_.getBytes)), family(colFamilyName).layout.codec)

  override def merge(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit =
    mergeList(key, Array(value), colFamilyName)

  /** Appends in the state server (WRITE_APPEND), without reading the list first. */
  def mergeList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit =
    session.appendBytes(key, MultiValues.encode(values.toSeq.map(_.getBytes)), family(colFamilyName).layout.codec)

  def allColumnFamilyNames: Set[String] = provider.families.names

  override def createColFamilyIfAbsent(colFamilyName: String, keySchema: StructType, valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec, useMultipleValuesPerKey: Boolean, isInternal: Boolean): Unit =
    provider.createFamily(colFamilyName, keySchema, valueSchema, keyStateEncoderSpec, useMultipleValuesPerKey, isInternal)

  /** Removes every entry of the family in this version, in the state server (its key range:
   *  WRITE_REMOVE_PREFIX); whether it existed (was created, or holds entries). */
  override def removeColFamilyIfExists(colFamilyName: String): Boolean = {
    val prefix = KeyCodec.familyPrefix(colFamilyName)
    val existed = provider.families.names.contains(colFamilyName) || {
      val scan = session.entries("removeColFamily", prefix)
      try scan.hasNext finally scan.close()
    }
    session.removePrefix(prefix)
    provider.families.forget(colFamilyName)
    existed
  }

  override def commit(): Long = {
    val committed = session.commit()
    provider.committed(committed)
    committed
  }

  override def abort(): Unit = session.abort()
  override def hasCommitted: Boolean = session.hasCommitted
  override def metrics: StateStoreMetrics = provider.withFamilyCounts(session.metrics)

  override def getStateStoreCheckpointInfo(): StateStoreCheckpointInfo = {
    val (v, id, baseId) = session.checkpointInfo
    StateStoreCheckpointInfo(session.id.partitionId, v, id, baseId)
  }

  /** A read store that goes on as this task's write store. */
  private[spark] def upgrade(): TtlStateStore = { session.upgrade(); this }
}

/** A scan's entries (key, value as stored) from `from` (inclusive; null: the first) until
 *  `until` (exclusive; null: the last), by unsigned byte order; the scan is closed at its end. */
private final class FamilyScan(scan: StoreVersion#EntryScan, from: Array[Byte], until: Array[Byte])
    extends Iterator[(Array[Byte], Array[Byte])] {
  private var ahead: (Array[Byte], Array[Byte]) = _
  private var ended = false

  override def hasNext: Boolean = {
    while (ahead == null && !ended && scan.hasNext) {
      scan.next()
      if (until != null && java.util.Arrays.compareUnsigned(scan.key, until) >= 0) close()
      else if (from == null || java.util.Arrays.compareUnsigned(scan.key, from) >= 0) ahead = (scan.key, scan.value)
    }
    ahead != null
  }

  override def next(): (Array[Byte], Array[Byte]) = {
    if (!hasNext) throw new NoSuchElementException("end of ttlstate iterator")
    val entry = ahead
    ahead = null
    entry
  }

  def close(): Unit = { ended = true; scan.close() }
}
