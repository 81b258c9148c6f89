package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import ttlstate.store.StoreVersion

/** Spark 4's StateStore over one loaded version (`StoreVersion`); `StoreApi` holds the methods
 *  whose signatures differ between 4.0 and 4.3. One column family (the default): Spark asks for
 *  others only for transformWithState and stream-stream join format 3+, which it refuses on any
 *  provider but its own. */
final class TtlStateStore(val session: StoreVersion, provider: TtlStateStoreProvider) extends StateStore with StoreApi {
  override def id: StateStoreId = session.id
  override def version: Long = session.version

  private def checkCf(cf: String): Unit = if (cf != StateStore.DEFAULT_COL_FAMILY_NAME) {
    throw StateStoreErrors.unsupportedOperationException(s"column family '$cf'", "TtlStateStoreProvider")
  }

  override def get(key: UnsafeRow, colFamilyName: String): UnsafeRow = { checkCf(colFamilyName); session.get(key) }

  private[spark] def multiGetRows(keys: Array[UnsafeRow], colFamilyName: String): Iterator[UnsafeRow] = {
    checkCf(colFamilyName)
    session.multiGet(keys)
  }

  private def scan(what: String, prefix: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] = {
    checkCf(colFamilyName)
    val rows = session.scan(what, prefix)
    new StateStoreIterator(rows, () => rows.close())
  }

  override def iterator(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = scan("iterator", null, colFamilyName)
  override def prefixScan(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    scan("prefixScan", prefixKey, colFamilyName)

  override def put(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = { checkCf(colFamilyName); session.put(key, value) }
  override def remove(key: UnsafeRow, colFamilyName: String): Unit = { checkCf(colFamilyName); session.remove(key) }

  override def commit(): Long = {
    val committed = session.commit()
    provider.committed(committed)
    committed
  }

  override def abort(): Unit = session.abort()
  override def hasCommitted: Boolean = session.hasCommitted
  override def metrics: StateStoreMetrics = session.metrics

  override def getStateStoreCheckpointInfo(): StateStoreCheckpointInfo = {
    val (v, id, baseId) = session.checkpointInfo
    StateStoreCheckpointInfo(session.id.partitionId, v, id, baseId)
  }

  /** A read store that goes on as this task's write store. */
  private[spark] def upgrade(): TtlStateStore = { session.upgrade(); this }

  // -- what ttlstate does not support (Spark only calls these for transformWithState and join
  // state format 3+). Declared without `override` where a Spark 4 line lacks them.
  private def unsupported(op: String) = StateStoreErrors.unsupportedOperationException(op, "TtlStateStoreProvider")
  override def valuesIterator(key: UnsafeRow, colFamilyName: String): Iterator[UnsafeRow] = throw unsupported("valuesIterator")
  def prefixScanWithMultiValues(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    throw unsupported("prefixScanWithMultiValues")
  def iteratorWithMultiValues(colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    throw unsupported("iteratorWithMultiValues")
  def allColumnFamilyNames: Set[String] = Set(StateStore.DEFAULT_COL_FAMILY_NAME)
  override def removeColFamilyIfExists(colFamilyName: String): Boolean = throw unsupported("removeColFamilyIfExists")
  override def createColFamilyIfAbsent(colFamilyName: String, keySchema: StructType, valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec, useMultipleValuesPerKey: Boolean, isInternal: Boolean): Unit =
    throw unsupported("createColFamilyIfAbsent")
  def putList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit = throw unsupported("putList")
  override def merge(key: UnsafeRow, value: UnsafeRow, colFamilyName: String): Unit = throw unsupported("merge")
  def mergeList(key: UnsafeRow, values: Array[UnsafeRow], colFamilyName: String): Unit = throw unsupported("mergeList")
}
