package ttlstate.spark

import java.util.{Collections, WeakHashMap}

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.streaming.StreamingQueryListener
import org.apache.spark.sql.ttlstatebridge.TransformWithStateLine
import org.slf4j.LoggerFactory
import ttlstate.conf.ConfKeys
import ttlstate.metadata.SparkMetadata

/** transformWithState in a session configured for ttlstate: the query runs on Spark's RocksDB
 *  provider instead of being refused.
 *
 *  Spark runs transformWithState only on its RocksDB provider (from 4.2 its operators refuse any
 *  other class name, `STORE_BACKEND_NOT_SUPPORTED_FOR_TWS`; on 4.0 and 4.1 its stores need column
 *  families, which ttlstate's provider does not offer). The provider is one per query: every stateful
 *  operator of a micro-batch query reads `spark.sql.streaming.stateStore.providerClass` from the
 *  session its batches run in, `StreamExecution.sparkSessionForStream`, a clone of the session
 *  that started the query, made in `start()`. So such a query is routed by setting that clone's
 *  provider class to RocksDB's, which touches neither the user's session nor other queries:
 *
 *  - `Listener.onQueryStarted` sets it. Spark posts `QueryStartedEvent` to the session's own
 *    listeners synchronously on the query's thread, before that thread records the clone's confs
 *    as the ones its offset log pins (`OffsetSeqMetadata`, at the first batch), so the checkpoint
 *    says what holds its state, as it would had the user set the provider: a restart, the state
 *    data source and a session without ttlstate all find Spark's RocksDB provider there.
 *  - `Reassert`, an optimizer rule of every session, sets it again in a routed query's batches
 *    when the offset log put ttlstate back (a checkpoint whose first batch failed under an
 *    earlier ttlstate that did not route): Spark applies the offset log's confs to the clone
 *    after the start event, and plans each batch after that.
 *
 *  `StartChecks` calls `atStart` when the query starts, which logs where the query runs (one
 *  INFO line) and which ttlstate confs do not apply to it, and installs the listener. */
object TransformWithStateRouting {
  val RocksDbProvider = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
  private val log = LoggerFactory.getLogger("ttlstate.spark.TransformWithStateRouting")
  // Keys that choose the state server's interpreter: they change nothing about a query's state.
  private val InterpreterKeys = Set(ConfKeys.PYTHON, ConfKeys.LOCAL_MODE_PYTHON)
  // The sessions of routed queries' batches (held weakly: a stopped query's clone goes away).
  private val routed = Collections.synchronizedSet(
    Collections.newSetFromMap(new WeakHashMap[SparkSession, java.lang.Boolean]()))

  /** Whether `plan` uses transformWithState, in any of its APIs, on this Spark line. */
  def uses(plan: LogicalPlan): Boolean = TransformWithStateLine.uses(plan)

  /** At `start()` of a query using transformWithState: where it runs, in one INFO line (`note`),
   *  when ttlstate would have held its state (the session's provider, or the one its checkpoint
   *  pins), installing `session`'s listener that routes it; and the ttlstate confs that would
   *  change a query's state, reported as not applying to it (`warn`). */
  private[spark] def atStart(session: SparkSession, checkpoint: String, provider: String, pinned: Option[String],
      ours: Map[String, String], note: String => Unit, warn: String => Unit): Unit = {
    val ttlstate = StartChecks.ProviderClass
    val runsOn = pinned.getOrElse(if (provider.isEmpty) SparkMetadata.HdfsProvider else provider) match {
      case `ttlstate` => RocksDbProvider
      case other => other
    }
    if (runsOn == RocksDbProvider && (provider == ttlstate || pinned.contains(ttlstate))) {
      install(session)
      note(s"ttlstate: this query (checkpoint $checkpoint) uses transformWithState, which Spark runs on its " +
        s"RocksDB provider only: the whole query, every stateful operator of it, runs on $RocksDbProvider, " +
        "which its checkpoint records" +
        (if (pinned.contains(ttlstate)) s" (its offset log still names $ttlstate, from a run before ttlstate " +
          "routed transformWithState, and the state data source would use that)" else "") +
        ". Its state variables expire by their TTLConfig.")
    }
    val applying = ours.keys.filterNot(InterpreterKeys).toSeq.sorted
    if (applying.nonEmpty) {
      warn(s"ttlstate: the ttlstate confs set for this session (${applying.mkString(", ")}) do not apply to " +
        s"this query (checkpoint $checkpoint): it uses transformWithState, whose state Spark keeps in $runsOn, " +
        "so ttlstate's TTL is off for every operator of it. Give its state variables a TTLConfig to expire them.")
    }
  }

  private def install(session: SparkSession): Unit = session.streams.synchronized {
    if (!session.streams.listListeners().exists(_.isInstanceOf[Listener])) session.streams.addListener(new Listener(session))
  }

  /** Routes the session `stream` of a query whose plan is `plan`, if it uses transformWithState. */
  private[spark] def route(plan: LogicalPlan, stream: SparkSession): Unit = if (uses(plan)) {
    routed.add(stream)
    reassert(stream)
  }

  private def reassert(stream: SparkSession): Unit =
    if (stream.conf.get(SparkMetadata.ProviderKey, "") == StartChecks.ProviderClass) {
      stream.conf.set(SparkMetadata.ProviderKey, RocksDbProvider)
      log.debug(s"ttlstate: a transformWithState query's batches run on $RocksDbProvider")
    }

  /** Routes each query `session` starts, before its first batch (see the object's doc). */
  final class Listener(session: SparkSession) extends StreamingQueryListener {
    override def onQueryStarted(event: StreamingQueryListener.QueryStartedEvent): Unit =
      Option(session.streams.get(event.id)).flatMap(TransformWithStateLine.stream).foreach { case (plan, stream) =>
        route(plan, stream)
      }
    override def onQueryProgress(event: StreamingQueryListener.QueryProgressEvent): Unit = ()
    override def onQueryTerminated(event: StreamingQueryListener.QueryTerminatedEvent): Unit = ()
  }

  /** In a routed query's session, its provider is RocksDB's again before each batch is planned. */
  final case class Reassert(session: SparkSession) extends Rule[LogicalPlan] {
    override def apply(plan: LogicalPlan): LogicalPlan = {
      if (routed.contains(session)) reassert(session)
      plan
    }
  }
}
