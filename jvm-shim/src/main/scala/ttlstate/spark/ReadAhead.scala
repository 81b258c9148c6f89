package ttlstate.spark

import java.util.concurrent.ConcurrentHashMap

import org.apache.spark.TaskContext
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, Predicate, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.execution.streaming.state.StateStoreId
import ttlstate.conf.{ConfKeys, ConfValues}
import ttlstate.metadata.SparkMetadata
import ttlstate.store.StoreVersion

/** Read-ahead of state for Spark's row-by-row reads.
 *
 *  Spark's deduplication and the restore step of its streaming aggregation call `get` once per
 *  input row, and a key that neither the executor's cache nor the key filter answers costs a
 *  synchronous round trip to the state server: on large, cold state most of a task's time. A
 *  `ReadAheadExec` under those operators takes `readAhead.chunkRows` input rows at a time,
 *  computes their state keys as the operator will, and has the task's store fetch the state of
 *  the keys it cannot answer in one round trip (`StoreVersion.readAhead`), remembered as `get`
 *  would remember it; the rows then flow on unchanged and their `get`s are answered in the JVM
 *  (Flink 2's batched asynchronous state access, done synchronously a chunk at a time). */
object ReadAhead {
  // The store each running task opened, per stateful operator: how the read-ahead, which runs in
  // the operator's task below it, finds the store the operator reads.
  private val open = new ConcurrentHashMap[(Long, Long), StoreVersion]()

  /** Called when a store is opened: registers it for its task until the task ends. */
  def opened(store: StoreVersion): Unit = {
    val task = TaskContext.get()
    if (task != null && store.id.storeName == StateStoreId.DEFAULT_STORE_NAME) {
      val key = (task.taskAttemptId(), store.id.operatorId)
      if (open.put(key, store) == null) task.addTaskCompletionListener[Unit](_ => open.remove(key))
    }
  }

  /** The open ttlstate store of `operatorId` in the calling task, if any. */
  def storeFor(operatorId: Long): Option[StoreVersion] =
    Option(TaskContext.get()).flatMap(t => Option(open.get((t.taskAttemptId(), operatorId)))).filter(_.isOpen)

  /** The session's `readAhead.chunkRows`; the state server refuses a bad value at OPEN. */
  def chunkRows(session: SparkSession): Int =
    ConfValues.get(ConfKeys.READ_AHEAD_CHUNK_ROWS, session.conf.getOption(ConfKeys.READ_AHEAD_CHUNK_ROWS)
      .map(ConfKeys.READ_AHEAD_CHUNK_ROWS -> _).toMap).toInt
}

/** Passes its child's rows on unchanged, `chunkRows` at a time, after reading ahead the state of
 *  their keys from the store of operator `operatorId`. Rows `skip` holds are not read ahead: the
 *  operator drops them without reading state (a deduplication's rows later than its watermark). */
final case class ReadAheadExec(keyExpressions: Seq[Expression], skip: Option[Expression], operatorId: Long,
    chunkRows: Int, child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def doExecute(): RDD[InternalRow] = {
    val (keys, late, input, op, chunk) = (keyExpressions, skip, child.output, operatorId, chunkRows)
    child.execute().mapPartitions({ rows =>
      val dropped = late.map(Predicate.create(_, input))
      dropped.foreach(_.initialize(TaskContext.getPartitionId()))
      new ReadAheadRows(rows, UnsafeProjection.create(keys, input), r => dropped.exists(_.eval(r)), op, chunk)
    }, preservesPartitioning = true)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): ReadAheadExec = copy(child = newChild)
}

/** When a task reads ahead: every chunk while chunks find keys to fetch. A chunk that found
 *  fewer than one key in `Sparse` to fetch means a hot working set, which the cache and the key
 *  filter answer without round trips; the read-ahead would only add its own work (a copy of each
 *  row, each key computed twice), so the next `Probe - 1` chunks' rows pass through untouched and
 *  the chunk after them probes again. */
final class ReadAheadPacing(chunkRows: Int) {
  import ReadAheadPacing._
  private var passRows = 0L

  /** Whether the next row starts a chunk to read ahead (else it passes through). */
  def readAhead: Boolean = passRows <= 0
  def passed(): Unit = passRows -= 1

  /** After a chunk: how many keys its read-ahead fetched (-1: the store reads none ahead). */
  def fetched(keys: Int): Unit =
    if (keys < 0) passRows = Long.MaxValue
    else if (keys.toLong * Sparse < chunkRows) passRows = chunkRows.toLong * (Probe - 1)
}

object ReadAheadPacing {
  val Sparse = 64
  val Probe = 16
}

private final class ReadAheadRows(rows: Iterator[InternalRow], key: UnsafeProjection, skip: InternalRow => Boolean,
    operatorId: Long, chunkRows: Int) extends Iterator[InternalRow] {
  private val chunk = new Array[InternalRow](chunkRows)
  private var filled = 0
  private var pos = 0
  private val pacing = new ReadAheadPacing(chunkRows)
  // Found at the first row: the operator opens its store before it asks for input. None (not a
  // ttlstate store, e.g. a checkpoint pinned to another provider): rows pass through.
  private lazy val store = ReadAhead.storeFor(operatorId)

  private def passing: Boolean = store.isEmpty || !pacing.readAhead

  override def hasNext: Boolean = pos < filled || (if (passing) rows.hasNext else { fill(); pos < filled })

  override def next(): InternalRow = {
    if (pos < filled) {
      pos += 1
      chunk(pos - 1)
    } else if (passing) {
      pacing.passed()
      rows.next()
    } else {
      if (!hasNext) throw new NoSuchElementException("end of the read-ahead input")
      next()
    }
  }

  private def fill(): Unit = {
    filled = 0
    pos = 0
    // Copies: the child may reuse one row object (a shuffle reader, a hash aggregate's output).
    while (filled < chunkRows && rows.hasNext) { chunk(filled) = rows.next().copy(); filled += 1 }
    if (filled > 0) pacing.fetched(store.get.readAhead(chunk.iterator.take(filled).filterNot(skip).map(key(_))))
  }
}

/** Puts a `ReadAheadExec` under every deduplication and aggregation restore of a streaming query
 *  on ttlstate (`SparkLine.readAheadTarget`: where the Spark line keeps those operators), once
 *  its state info is set (Spark's streaming planning runs this after its own `state` rule).
 *  Installed by `TtlStateExtensions` as a columnar rule: the one physical-plan hook of an
 *  extension that the batches of a streaming query run through. Not in Real-time Mode: there
 *  rows must flow on as they arrive, not a chunk at a time, and Spark refuses operators outside
 *  its allowlist. */
final case class ReadAheadRule(session: SparkSession) extends ColumnarRule {
  override def preColumnarTransitions: Rule[SparkPlan] = new Rule[SparkPlan] {
    override def apply(plan: SparkPlan): SparkPlan = {
      lazy val chunk = ReadAhead.chunkRows(session)
      if (session.conf.get(SparkMetadata.ProviderKey, "") != StartChecks.ProviderClass || chunk <= 0 ||
          SparkLine.realTime(plan)) plan
      else plan.transformUp {
        case op if !op.children.headOption.exists(_.isInstanceOf[ReadAheadExec]) && op.children.size == 1 &&
            SparkLine.readAheadTarget(op).isDefined =>
          val (keys, skip, operatorId) = SparkLine.readAheadTarget(op).get
          op.withNewChildren(Seq(ReadAheadExec(keys, skip, operatorId, chunk, op.children.head)))
      }
    }
  }
}
