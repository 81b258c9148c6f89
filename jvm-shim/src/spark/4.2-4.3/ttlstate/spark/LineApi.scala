package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.ttlstatebridge.NextIteratorBridge
import ttlstate.store.LoadRequest

/** Spark 4.2's and 4.3's signatures: getStore with `forceSnapshotOnCommit` and `loadEmpty`, the
 *  upgrade of a read store, replay and change feed with checkpoint ids; `LineMaintenance` (4.3:
 *  snapshot and cleanup called apart). */
trait ProviderApi extends StateStoreProvider with SupportsFineGrainedReplay with LineMaintenance {
  self: TtlStateStoreProvider =>

  // forceSnapshotOnCommit: Spark's coordinator found the store's snapshots lagging (the store
  // reports each one it publishes: SparkLine.snapshotUploaded); its next maintenance writes one.
  override def getStore(version: Long, stateStoreCkptId: Option[String], forceSnapshotOnCommit: Boolean,
      loadEmpty: Boolean): StateStore =
    open(LoadRequest(version, readOnly = false, stateStoreCkptId, empty = loadEmpty,
      forceSnapshot = forceSnapshotOnCommit))

  override def upgradeReadStoreToWriteStore(readStore: ReadStateStore, version: Long, uniqueId: Option[String],
      forceSnapshotOnCommit: Boolean): StateStore = {
    if (forceSnapshotOnCommit) forceSnapshot()
    upgrade(readStore, version, uniqueId)
  }

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

/** Spark 4.2's and 4.3's StateStore: multiGet in one round trip; a read store is released, not
 *  aborted. */
trait StoreApi extends StateStore { self: TtlStateStore =>
  override def release(): Unit = session.release()
  override def multiGet(keys: Array[UnsafeRow], colFamilyName: String): Iterator[UnsafeRow] =
    multiGetRows(keys, colFamilyName)
}
