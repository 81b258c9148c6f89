package ttlstate.spark

import org.apache.spark.sql.execution.streaming.state.StateStoreProvider

/** Spark 4.3 runs snapshot and cleanup maintenance apart, on their own threads. */
trait LineMaintenance extends StateStoreProvider { self: TtlStateStoreProvider =>
  override def doSnapshotMaintenance(): Unit = snapshotMaintenance()
  override def doCleanupMaintenance(): Unit = cleanupMaintenance()
}
