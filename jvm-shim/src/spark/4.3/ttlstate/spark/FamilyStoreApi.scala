package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{KeyStateEncoderSpec, StateStore, StateStoreIterator,
  UnsafeRowPair}
import org.apache.spark.sql.types.StructType

/** Spark 4.3's range scans of a column family, and the state data source's registration of the
 *  family it reads on a read store. */
trait FamilyStoreApi extends StateStore { self: TtlStateStore =>
  override def rangeScan(startKey: Option[UnsafeRow], endKey: Option[UnsafeRow],
      colFamilyName: String): StateStoreIterator[UnsafeRowPair] = rangeRows(startKey, endKey, colFamilyName, everyValue = false)
  override def rangeScanWithMultiValues(startKey: Option[UnsafeRow], endKey: Option[UnsafeRow],
      colFamilyName: String): StateStoreIterator[UnsafeRowPair] = rangeRows(startKey, endKey, colFamilyName, everyValue = true)
  override def registerColFamily(colFamilyName: String, keySchema: StructType, valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec, useMultipleValuesPerKey: Boolean, isInternal: Boolean): Unit =
    createColFamilyIfAbsent(colFamilyName, keySchema, valueSchema, keyStateEncoderSpec, useMultipleValuesPerKey, isInternal)
}
