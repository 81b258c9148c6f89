package ttlstate.spark

import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.datasources.v2.RealTimeStreamScanExec
import org.apache.spark.sql.execution.streaming.operators.stateful.{StateStoreRestoreExec, StreamingDeduplicateExec}
import org.apache.spark.sql.execution.streaming.state.StateStoreId

/** Read-ahead of state for Spark's row-by-row reads.
 *
 *  Spark's deduplication and the restore step of its streaming aggregation call `get` once per
 *  input row; a key neither the executor's cache nor its key filter answers costs a synchronous
 *  round trip to the state server. `PrefetchExec`, inserted under those operators by
 *  `PrefetchRule`, reads `prefetch.chunkRows` input rows ahead, computes their state keys as the
 *  operator will, and hands them to the task's store, which fetches the unanswered ones in one
 *  round trip (`TtlStateStore.prefetch`) and remembers them as `get` would: the rows then flow on
 *  unchanged and their reads are answered in the JVM (Flink 2's batched asynchronous state
 *  access, done synchronously a chunk at a time). */
object Prefetch {
  // The store each running task opened, per stateful operator: how the read-ahead, which runs in
  // the operator's task below it, finds the store the operator is about to read.
  private val open = new ConcurrentHashMap[(Long, Long), TtlStateStore]()

  /** Called when a store is opened: registers it for its task until the task ends. */
  def opened(store: TtlStateStore): Unit = {
    val task = TaskContext.get()
    if (task != null && store.id.storeName == StateStoreId.DEFAULT_STORE_NAME) {
      val key = (task.taskAttemptId(), store.id.operatorId)
      if (open.put(key, store) == null) task.addTaskCompletionListener[Unit](_ => open.remove(key))
    }
  }

  /** The open store of `operatorId` in the calling task, if it is a ttlstate one. */
  def storeFor(operatorId: Long): Option[TtlStateStore] =
    Option(TaskContext.get()).flatMap(t => Option(open.get((t.taskAttemptId(), operatorId)))).filter(_.isOpen)

  def chunkRows(session: SparkSession): Int =
    Try(session.conf.get(ConfKeys.PREFETCH_CHUNK_ROWS, ConfKeys.DEFAULT_PREFETCH_CHUNK_ROWS.toString).trim.toInt)
      .getOrElse(ConfKeys.DEFAULT_PREFETCH_CHUNK_ROWS) // the state server refuses a bad value at OPEN
}

/** Passes its child's rows on unchanged, `chunkRows` at a time, after prefetching their keys'
 *  state from the store of operator `operatorId`. */
final case class PrefetchExec(keyExpressions: Seq[Expression], operatorId: Long, chunkRows: Int, child: SparkPlan)
    extends UnaryExecNode {
  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def doExecute(): RDD[InternalRow] = {
    val (keys, input, op, chunk) = (keyExpressions, child.output, operatorId, chunkRows)
    child.execute().mapPartitions(rows => new ReadAhead(rows, UnsafeProjection.create(keys, input), op, chunk),
      preservesPartitioning = true)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): PrefetchExec = copy(child = newChild)
}

private final class ReadAhead(rows: Iterator[InternalRow], key: UnsafeProjection, operatorId: Long,
    chunkRows: Int) extends Iterator[InternalRow] {
  private val chunk = new Array[InternalRow](chunkRows)
  private var filled = 0
  private var pos = 0

  override def hasNext: Boolean = pos < filled || { fill(); pos < filled }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException("end of the prefetched input")
    pos += 1
    chunk(pos - 1)
  }

  private def fill(): Unit = {
    filled = 0
    pos = 0
    // copies: the child may reuse one row object (a shuffle reader, a hash aggregate's output)
    while (filled < chunkRows && rows.hasNext) { chunk(filled) = rows.next().copy(); filled += 1 }
    if (filled > 0) Prefetch.storeFor(operatorId).foreach(_.prefetch(chunk.iterator.take(filled).map(key(_))))
  }
}

/** Puts a `PrefetchExec` under every deduplication and aggregation restore of a streaming query
 *  on ttlstate, once its state info is set (Spark's streaming planning runs this after its own
 *  `state` rule). Installed by `TtlStateExtensions` as a columnar rule: the one physical-plan
 *  hook an extension has that streaming batches run. Never in Real-time Mode: there a row must
 *  flow on as soon as it arrives, not wait for a chunk to fill. */
final case class PrefetchRule(session: SparkSession) extends ColumnarRule {
  override def preColumnarTransitions: Rule[SparkPlan] = new Rule[SparkPlan] {
    override def apply(plan: SparkPlan): SparkPlan = {
      lazy val chunk = Prefetch.chunkRows(session)
      if (session.conf.get(Migration.ProviderKey, "") != StartChecks.ProviderClass || chunk <= 0 ||
          plan.exists(_.isInstanceOf[RealTimeStreamScanExec])) plan
      else plan.transformUp {
        case d: StreamingDeduplicateExec if d.stateInfo.isDefined && !d.child.isInstanceOf[PrefetchExec] =>
          d.withNewChildren(Seq(PrefetchExec(d.keyExpressions, d.stateInfo.get.operatorId, chunk, d.child)))
        case r: StateStoreRestoreExec if r.stateInfo.isDefined && !r.child.isInstanceOf[PrefetchExec] =>
          r.withNewChildren(Seq(PrefetchExec(r.keyExpressions, r.stateInfo.get.operatorId, chunk, r.child)))
      }
    }
  }
}
