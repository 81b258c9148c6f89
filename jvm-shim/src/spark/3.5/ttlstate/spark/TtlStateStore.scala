package ttlstate.spark

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{ReadStateStore, StateStore, StateStoreId, StateStoreMetrics, UnsafeRowPair}
import ttlstate.store.StoreVersion

/** Spark 3.5's StateStore over one loaded version (`StoreVersion`). */
final class TtlStateStore(val session: StoreVersion) extends StateStore {
  override def id: StateStoreId = session.id
  override def version: Long = session.version
  override def get(key: UnsafeRow): UnsafeRow = session.get(key)
  override def iterator(): Iterator[UnsafeRowPair] = session.scan("iterator", null)
  override def prefixScan(prefixKey: UnsafeRow): Iterator[UnsafeRowPair] = session.scan("prefixScan", prefixKey)
  override def put(key: UnsafeRow, value: UnsafeRow): Unit = session.put(key, value)
  override def remove(key: UnsafeRow): Unit = session.remove(key)
  override def commit(): Long = session.commit()
  override def abort(): Unit = session.abort()
  override def metrics: StateStoreMetrics = session.metrics
  override def hasCommitted: Boolean = session.hasCommitted
}

/** A read store of a version whose write store the same task holds (see `TaskStores`): reads
 *  through it; the write store's owner commits or aborts it. */
final class SharedReadStore(store: TtlStateStore) extends ReadStateStore {
  override def id: StateStoreId = store.id
  override def version: Long = store.version
  override def get(key: UnsafeRow): UnsafeRow = store.get(key)
  override def prefixScan(prefixKey: UnsafeRow): Iterator[UnsafeRowPair] = store.prefixScan(prefixKey)
  override def iterator(): Iterator[UnsafeRowPair] = store.iterator()
  override def abort(): Unit = ()
}
