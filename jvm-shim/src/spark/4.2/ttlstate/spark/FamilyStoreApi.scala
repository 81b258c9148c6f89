package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{StateStore, StateStoreIterator, UnsafeRowPair}

/** Spark 4.2's range scans of a column family. */
trait FamilyStoreApi extends StateStore { self: TtlStateStore =>
  override def rangeScan(startKey: Option[UnsafeRow], endKey: Option[UnsafeRow],
      colFamilyName: String): StateStoreIterator[UnsafeRowPair] = rangeRows(startKey, endKey, colFamilyName, everyValue = false)
  override def rangeScanWithMultiValues(startKey: Option[UnsafeRow], endKey: Option[UnsafeRow],
      colFamilyName: String): StateStoreIterator[UnsafeRowPair] = rangeRows(startKey, endKey, colFamilyName, everyValue = true)
}
