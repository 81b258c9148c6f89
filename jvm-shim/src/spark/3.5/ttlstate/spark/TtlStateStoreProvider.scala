package ttlstate.spark

import java.util.concurrent.ConcurrentHashMap

import org.apache.hadoop.conf.Configuration
import org.apache.spark.TaskContext
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import ttlstate.store.{KeyCodec, LoadRequest, ProviderCore, StoreSpec}

/** Spark's entry point on Spark 3.5: its provider contract mapped onto `ProviderCore`, which does
 *  the work (every store operation goes to the executor's ttlstate state server). Spark 3.5 has
 *  no checkpoint ids, no state data source and no upgrade of a read store; its aggregation loads
 *  the write store of a version, then a read store of the same version in the same task, which
 *  here reads through the write store (`SharedReadStore`), and the other way round a read store
 *  becomes the task's write store, as on Spark 4.
 *
 *  The constructor does nothing: Spark creates throwaway instances on the driver just to read
 *  `supportedCustomMetrics`, so no process may start before `init`/`getStore`. */
class TtlStateStoreProvider extends StateStoreProvider {
  private var core: ProviderCore = _
  // The open store of each running task of this provider, by task attempt.
  private val ofTask = new ConcurrentHashMap[Long, TtlStateStore]()

  override def init(stateStoreId: StateStoreId, keySchema: StructType, valueSchema: StructType,
      numColsPrefixKey: Int, storeConfs: StateStoreConf, hadoopConf: Configuration): Unit = {
    SparkVersion.check()
    core = new ProviderCore(StoreSpec(stateStoreId, keySchema, valueSchema, KeyCodec(numColsPrefixKey, keySchema),
      storeConfs.sqlConfs, hadoopConf, checkpointIds = false, minVersionsToRetain = storeConfs.minVersionsToRetain,
      commitValidation = false))
  }

  override def stateStoreId: StateStoreId = core.id

  /** The task's open store of `version`, if it has one. */
  private def taskStore(version: Long): Option[TtlStateStore] =
    Option(TaskContext.get()).flatMap(t => Option(ofTask.get(t.taskAttemptId())))
      .filter(s => s.version == version && s.session.isOpen)

  private def open(req: LoadRequest): TtlStateStore = {
    val store = new TtlStateStore(core.load(req))
    ReadAhead.opened(store.session)
    Option(TaskContext.get()).foreach { task =>
      val attempt = task.taskAttemptId()
      if (ofTask.put(attempt, store) == null) {
        task.addTaskCompletionListener[Unit] { _ =>
          // A read store nothing upgraded is released, as Spark 4 releases it.
          Option(ofTask.remove(attempt)).filter(_.session.isOpen).foreach(_.session.release())
        }
      }
    }
    store
  }

  override def getStore(version: Long): StateStore = taskStore(version) match {
    case Some(s) if s.session.isReadOnly => s.session.upgrade(); s
    case _ => open(LoadRequest(version, readOnly = false))
  }

  override def getReadStore(version: Long): ReadStateStore = taskStore(version) match {
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
