package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.ttlstatebridge.NextIteratorBridge
import ttlstate.store.LoadRequest

/** Spark 4.0's signatures: getStore by version and checkpoint id, no upgrade of a read store
 *  (Spark loads a write store), replay and change feed without checkpoint ids. */
trait ProviderApi extends StateStoreProvider with SupportsFineGrainedReplay { self: TtlStateStoreProvider =>
  override def getStore(version: Long, uniqueId: Option[String]): StateStore =
    open(LoadRequest(version, readOnly = false, uniqueId))

  override def replayStateFromSnapshot(snapshotVersion: Long, endVersion: Long): StateStore =
    replay(snapshotVersion, endVersion, readOnly = false, None, None)

  override def replayReadStateFromSnapshot(snapshotVersion: Long, endVersion: Long): ReadStateStore =
    replay(snapshotVersion, endVersion, readOnly = true, None, None)

  override def getStateStoreChangeDataReader(startVersion: Long, endVersion: Long, colFamilyNameOpt: Option[String])
      : NextIteratorBridge[(RecordType.Value, UnsafeRow, UnsafeRow, Long)] =
    changeFeed(startVersion, endVersion, colFamilyNameOpt, None)
}

/** Spark 4.0's StateStore has no method beyond the common ones. */
trait StoreApi extends StateStore
