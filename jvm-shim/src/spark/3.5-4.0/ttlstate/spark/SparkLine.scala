package ttlstate.spark

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.catalyst.expressions.Expression
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.streaming.{CheckpointFileManager, StateStoreRestoreExec, StreamingDeduplicateExec}
import org.apache.spark.sql.execution.streaming.state.{StateStoreConf, StateStoreId}

/** Spark 3.5 and 4.0: the checkpoint file manager and the stateful operators in Spark's
 *  `execution.streaming` package, no Real-time Mode, no commit validation. */
object SparkLine {
  type FileManager = CheckpointFileManager
  def fileManager(dir: Path, conf: Configuration): FileManager = CheckpointFileManager.create(dir, conf)

  /** Whether a task's read and write store of one version are one (`TaskStores`): where Spark
   *  cannot upgrade a read store itself. */
  val sharesTaskStores: Boolean = true

  def commitValidation(conf: StateStoreConf): Boolean = false
  def reportCommit(version: Long, id: StateStoreId, conf: Configuration): Unit = ()
  /** Spark 4.1+'s coordinator watches snapshot uploads; these lines have none to tell. */
  def snapshotUploaded(id: StateStoreId, conf: StateStoreConf, hadoopConf: Configuration)(version: Long): Unit = ()

  def realTime(plan: SparkPlan): Boolean = false

  /** Spark's operators whose `get`s the read-ahead serves, with their state keys, the rows they
   *  drop without reading state, and their operator id: `ReadAheadRule`'s targets. */
  def readAheadTarget(plan: SparkPlan): Option[(Seq[Expression], Option[Expression], Long)] = plan match {
    case d: StreamingDeduplicateExec if d.stateInfo.isDefined =>
      Some((d.keyExpressions, d.watermarkExpressionForLateEvents, d.stateInfo.get.operatorId))
    case r: StateStoreRestoreExec if r.stateInfo.isDefined => Some((r.keyExpressions, None, r.stateInfo.get.operatorId))
    case _ => None
  }
}
