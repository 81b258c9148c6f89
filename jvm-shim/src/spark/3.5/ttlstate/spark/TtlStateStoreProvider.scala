package ttlstate.spark

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import ttlstate.store.{KeyCodec, LoadRequest, ProviderCore, StoreSpec}

/** Spark's entry point on Spark 3.5: its provider contract mapped onto `ProviderCore`, which does
 *  the work (every store operation goes to the executor's ttlstate state server). Spark 3.5 has
 *  no checkpoint ids, no state data source and no upgrade of a read store (see `TaskStores`).
 *
 *  The constructor does nothing: Spark creates throwaway instances on the driver just to read
 *  `supportedCustomMetrics`, so no process may start before `init`/`getStore`. */
class TtlStateStoreProvider extends StateStoreProvider {
  private var core: ProviderCore = _
  private val tasks = new TaskStores[TtlStateStore](_.session)

  override def init(stateStoreId: StateStoreId, keySchema: StructType, valueSchema: StructType,
      numColsPrefixKey: Int, storeConfs: StateStoreConf, hadoopConf: Configuration): Unit = {
    SparkVersion.check()
    core = new ProviderCore(StoreSpec(stateStoreId, keySchema, valueSchema, KeyCodec(numColsPrefixKey, keySchema),
      storeConfs.sqlConfs, hadoopConf, checkpointIds = false, minVersionsToRetain = storeConfs.minVersionsToRetain,
      commitValidation = false))
  }

  override def stateStoreId: StateStoreId = core.id

  private def open(req: LoadRequest): TtlStateStore = {
    val store = new TtlStateStore(core.load(req))
    ReadAhead.opened(store.session)
    tasks.opened(store)
  }

  override def getStore(version: Long): StateStore = tasks.current(version) match {
    case Some(s) if s.session.isReadOnly => s.session.upgrade(); s
    case _ => open(LoadRequest(version, readOnly = false))
  }

  /** A write store of `version` that starts empty, whatever the checkpoint holds: the loadEmpty of
   *  Spark 4.2, which this line lacks, for `ttlstate migrate` (its tools jar) to write a migrated
   *  store's state as the version the query goes on from. */
  private[ttlstate] def emptyStore(version: Long): StateStore =
    open(LoadRequest(version, readOnly = false, empty = true))

  override def getReadStore(version: Long): ReadStateStore = tasks.current(version) match {
    case Some(s) => if (s.session.isReadOnly) s else new SharedReadStore(s)
    case None => open(LoadRequest(version, readOnly = true))
  }

  override def doMaintenance(): Unit = if (core != null) {
    core.snapshotMaintenance()
    core.cleanupMaintenance()
  }

  override def close(): Unit = if (core != null) core.close()

  override def supportedCustomMetrics: Seq[StateStoreCustomMetric] = Metrics.all
}
