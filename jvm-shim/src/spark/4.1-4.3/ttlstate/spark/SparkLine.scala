package ttlstate.spark

import java.util.UUID

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.datasources.v2.RealTimeStreamScanExec
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
import org.apache.spark.sql.execution.streaming.operators.stateful.{StateStoreRestoreExec, StreamingDeduplicateExec}
import org.apache.spark.sql.execution.streaming.state.{StateStore, StateStoreConf, StateStoreId}
import org.apache.spark.sql.ttlstatebridge.SnapshotUploads

/** What Spark 4.1 to 4.3 keep where 4.0 did not: the checkpoint file manager and the stateful
 *  operators in packages of their own, Real-time Mode, commit validation. */
object SparkLine {
  type FileManager = CheckpointFileManager
  def fileManager(dir: Path, conf: Configuration): FileManager = CheckpointFileManager.create(dir, conf)

  /** Whether a task's read and write store of one version are one (`TaskStores`): where Spark
   *  cannot upgrade a read store itself. */
  val sharesTaskStores: Boolean = false

  def commitValidation(conf: StateStoreConf): Boolean = conf.commitValidationEnabled
  def reportCommit(version: Long, id: StateStoreId, conf: Configuration): Unit =
    StateStore.reportCommitToCoordinator(version, id, conf)

  /** Tells Spark's coordinator a snapshot of `version` was published (`coordinatorReportSnapshot
   *  UploadLag`, on by default), as Spark's own providers do; only a streaming query's stores,
   *  whose Hadoop conf carries the query's run id. */
  def snapshotUploaded(id: StateStoreId, conf: StateStoreConf, hadoopConf: Configuration)(version: Long): Unit =
    if (conf.reportSnapshotUploadLag) {
      Option(hadoopConf.get("sql.streaming.runId")).flatMap(r => scala.util.Try(UUID.fromString(r)).toOption)
        .foreach(runId => SnapshotUploads.report(id, runId, version))
    }

  /** Real-time Mode: rows must flow on as they arrive, not a chunk at a time. */
  def realTime(plan: SparkPlan): Boolean = plan.exists(_.isInstanceOf[RealTimeStreamScanExec])

  /** Spark's operators whose `get`s the read-ahead serves, with their state keys, the rows they
   *  drop without reading state, and their operator id: `ReadAheadRule`'s targets. */
  def readAheadTarget(plan: SparkPlan): Option[(Seq[Expression], Option[Expression], Long)] = plan match {
    case d: StreamingDeduplicateExec if d.stateInfo.isDefined =>
      Some((d.keyExpressions, d.watermarkExpressionForLateEvents, d.stateInfo.get.operatorId))
    case r: StateStoreRestoreExec if r.stateInfo.isDefined => Some((r.keyExpressions, None, r.stateInfo.get.operatorId))
    case _ => None
  }
}
