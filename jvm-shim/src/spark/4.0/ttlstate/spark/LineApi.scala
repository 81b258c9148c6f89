package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.ttlstatebridge.NextIteratorBridge
import ttlstate.store.LoadRequest

/** Spark 4.0's signatures: getStore by version and checkpoint id, no upgrade of a read store (a
 *  task's read and write store of one version are one: `TaskStores`), replay and change feed
 *  without checkpoint ids. */
trait ProviderApi extends StateStoreProvider with SupportsFineGrainedReplay { self: TtlStateStoreProvider =>
  override def getStore(version: Long, uniqueId: Option[String]): StateStore = tasks.current(version) match {
    case Some(s) if s.session.isReadOnly => s.upgrade()
    case _ => open(LoadRequest(version, readOnly = false, uniqueId))
  }

  override def getReadStore(version: Long, uniqueId: Option[String]): ReadStateStore = tasks.current(version) match {
    case Some(s) => if (s.session.isReadOnly) s else new SharedReadStore(s)
    case None => open(LoadRequest(version, readOnly = true, uniqueId))
  }

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

/** A read store of a version whose write store the same task holds (see `TaskStores`): reads
 *  through it; the write store's owner commits or aborts it. */
final class SharedReadStore(store: TtlStateStore) extends ReadStateStore {
  override def id: StateStoreId = store.id
  override def version: Long = store.version
  override def get(key: UnsafeRow, colFamilyName: String): UnsafeRow = store.get(key, colFamilyName)
  override def valuesIterator(key: UnsafeRow, colFamilyName: String): Iterator[UnsafeRow] =
    store.valuesIterator(key, colFamilyName)
  override def prefixScan(prefixKey: UnsafeRow, colFamilyName: String): StateStoreIterator[UnsafeRowPair] =
    store.prefixScan(prefixKey, colFamilyName)
  override def iterator(colFamilyName: String): StateStoreIterator[UnsafeRowPair] = store.iterator(colFamilyName)
  override def abort(): Unit = ()
}
