package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.ttlstatebridge.NextIteratorBridge
import ttlstate.store.LoadRequest

/** Spark 4.1's signatures: getStore by version and checkpoint id, the upgrade of a read store,
 *  replay and change feed with checkpoint ids. */
trait ProviderApi extends StateStoreProvider with SupportsFineGrainedReplay { self: TtlStateStoreProvider =>
  override def getStore(version: Long, uniqueId: Option[String]): StateStore =
    open(LoadRequest(version, readOnly = false, uniqueId))

  override def upgradeReadStoreToWriteStore(readStore: ReadStateStore, version: Long,
      uniqueId: Option[String]): StateStore = upgrade(readStore, version, uniqueId)

  override def getReadStore(version: Long, uniqueId: Option[String]): ReadStateStore =
    open(LoadRequest(version, readOnly = true, uniqueId))

  override def replayStateFromSnapshot(snapshotVersion: Long, endVersion: Long, readOnly: Boolean,
      snapshotVersionStateStoreCkptId: Option[String], endVersionStateStoreCkptId: Option[String]): StateStore =
    replay(snapshotVersion, endVersion, readOnly, snapshotVersionStateStoreCkptId, endVersionStateStoreCkptId)

  override def replayReadStateFromSnapshot(snapshotVersion: Long, endVersion: Long,
      snapshotVersionStateStoreCkptId: Option[String], endVersionStateStoreCkptId: Option[String]): ReadStateStore =
    replay(snapshotVersion, endVersion, readOnly = true, snapshotVersionStateStoreCkptId, endVersionStateStoreCkptId)

  override def getStateStoreChangeDataReader(startVersion: Long, endVersion: Long, colFamilyNameOpt: Option[String],
      endVersionStateStoreCkptId: Option[String]): NextIteratorBridge[(RecordType.Value, UnsafeRow, UnsafeRow, Long)] =
    changeFeed(startVersion, endVersion, colFamilyNameOpt, endVersionStateStoreCkptId)
}

/** Spark 4.1's StateStore: a read store is released, not aborted. */
trait StoreApi extends StateStore { self: TtlStateStore =>
  override def release(): Unit = session.release()
}
