package ttlstate.spark

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.{ConcurrentHashMap, TimeUnit}

import scala.util.Try

import org.apache.spark.sql.{SparkSession, SparkSessionExtensions}
import org.apache.spark.sql.catalyst.plans.logical.{Aggregate, Deduplicate, DeduplicateWithinWatermark,
  EventTimeWatermark, FlatMapGroupsInPandasWithState, FlatMapGroupsWithState, GlobalLimit, Join, LogicalPlan}
import org.apache.spark.sql.catalyst.streaming.WriteToStream
import org.slf4j.LoggerFactory
import ttlstate.client.Json
import ttlstate.conf.{ConfKeys, KeySpelling}
import ttlstate.metadata.SparkMetadata
import ttlstate.server.{ServerLaunch, ServerPython}

/** `spark.sql.extensions=ttlstate.spark.TtlStateExtensions` (set by `ttlstate.configure`, or in
 *  spark-defaults.conf / `--conf`; that Java class checks the Spark line, then applies this one):
 *  ttlstate's checks run when a streaming query starts.
 *
 *  The hook is a check rule of the analyzer. `DataStreamWriter.start()` analyzes the query's
 *  `WriteToStream` plan, with its resolved checkpoint location, on the calling thread before the
 *  query's thread exists, so an error thrown here is raised by `start()` itself, before any batch
 *  (a StreamingQueryListener's onQueryStarted cannot fail a query: Spark logs and swallows what a
 *  listener throws). The extension also plans the read-ahead of state (`ReadAheadRule`). */
class TtlStateSessionExtensions extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    SparkVersion.check() // at session start, before any query: the wrong jar is named at once
    extensions.injectCheckRule(session => (plan: LogicalPlan) => plan match {
      case w: WriteToStream => StartChecks.onStart(session, w.resolvedCheckpointLocation, Some(w.inputQuery))
      case _ =>
    })
    extensions.injectColumnar(ReadAheadRule(_))
    extensions.injectOptimizerRule(TransformWithStateRouting.Reassert(_))
    extensions.injectColumnar(TransformWithStateServing.Admit(_))
  }
}

object StartChecks {
  private val log = LoggerFactory.getLogger("ttlstate.spark.StartChecks")
  val ProviderClass: String = classOf[TtlStateStoreProvider].getName
  private val validated = new ConcurrentHashMap[String, Option[String]]()
  private val warnings = new java.util.concurrent.ConcurrentLinkedDeque[String]()

  /** The last warnings these checks logged (newest last), for tests and notebooks. */
  def recentWarnings(): java.util.List[String] = new java.util.ArrayList[String](warnings)

  private[spark] def warn(message: String): Unit = {
    log.warn(message)
    warnings.addLast(message)
    while (warnings.size > 20) warnings.pollFirst()
  }

  private val notes = new java.util.concurrent.ConcurrentLinkedDeque[String]()

  /** The last INFO lines these checks logged (newest last), for tests and notebooks. */
  def recentNotes(): java.util.List[String] = new java.util.ArrayList[String](notes)

  private[spark] def note(message: String): Unit = {
    log.info(message)
    notes.addLast(message)
    while (notes.size > 20) notes.pollFirst()
  }

  // operator.<id>.ttl or operator.<name>.ttl (the validator checks the name is one Spark reports)
  private val OperatorKey = ("^" + java.util.regex.Pattern.quote(ConfKeys.PREFIX) +
    "operator\\.(\\d+|[A-Za-z_][A-Za-z0-9_]*)\\.ttl$").r
  private def knownKeys: Seq[String] =
    ConfKeys.SUFFIXES.filterNot(_.contains("<")).map(ConfKeys.PREFIX + _) :+ (ConfKeys.PREFIX + "operator.0.ttl")

  private def distance(a: String, b: String): Int = {
    val d = Array.tabulate(a.length + 1, b.length + 1)((i, j) => if (i == 0) j else if (j == 0) i else 0)
    for (i <- 1 to a.length; j <- 1 to b.length) {
      d(i)(j) = math.min(math.min(d(i - 1)(j) + 1, d(i)(j - 1) + 1),
        d(i - 1)(j - 1) + (if (a(i - 1) == b(j - 1)) 0 else 1))
    }
    d(a.length)(b.length)
  }

  /** "Unknown ttlstate conf ...: did you mean ...?" for a key under our prefix that we do not know. */
  def unknownKeyMessage(key: String, value: String): Option[String] =
    if (!key.startsWith(ConfKeys.PREFIX) || knownKeys.contains(key) || OperatorKey.findFirstIn(key).isDefined) None
    else {
      val (closest, d) = knownKeys.map(k => k -> distance(key, k)).minBy(_._2)
      val suffix = key.stripPrefix(ConfKeys.PREFIX)
      val hint = KeySpelling.inOtherCase(key).map(k => s"did you mean '$k'? (keys are case-sensitive)")
        .getOrElse(if (d <= math.max(2, suffix.length / 3)) s"did you mean '$closest'?" else "see the configuration reference, docs/configuration.md")
      Some(s"Unknown ttlstate conf '$key' (set to '$value'): $hint")
    }

  val TimeSourceKey: String = ConfKeys.TIME_SOURCE

  /** Whether `plan` has a stateful operator (those that keep state in a state store provider). */
  private def stateful(plan: LogicalPlan): Boolean = plan.exists {
    case _: Aggregate | _: Deduplicate | _: DeduplicateWithinWatermark | _: FlatMapGroupsWithState |
         _: FlatMapGroupsInPandasWithState | _: GlobalLimit => true
    case j: Join => j.left.isStreaming && j.right.isStreaming
    case _ => false
  }

  /** `timeSource=watermark` counts TTL in the batch's event-time watermark: a stateful query
   *  without one would never expire anything (its watermark stays 0), so it is refused. */
  def watermarkMessage(timeSource: Option[String], plan: LogicalPlan): Option[String] =
    if (!timeSource.exists(_.trim.equalsIgnoreCase("watermark")) || !stateful(plan) ||
        plan.exists(_.isInstanceOf[EventTimeWatermark])) None
    else Some(s"Invalid value '${timeSource.get}' for conf '$TimeSourceKey': allowed only for a query " +
      "with an event-time watermark, and this stateful query has none, so TTL would count no time at all. " +
      "Add one (df.withWatermark(\"<event time column>\", \"<delay>\")) before the stateful operator, or " +
      s"set $TimeSourceKey=activeTime (processing time that does not count outages) or batchTimestamp for " +
      "this query.")

  /** Runs at `start()` of every streaming query of a session with the extension. */
  def onStart(session: SparkSession, checkpoint: String, plan: Option[LogicalPlan] = None): Unit = {
    val conf = session.conf
    val provider = conf.getOption(SparkMetadata.ProviderKey).getOrElse("")
    val ours = conf.getAll.filter(_._1.startsWith(ConfKeys.PREFIX))
    val hadoopConf = session.sparkContext.hadoopConfiguration
    val pinned = if (checkpoint == null) None else SparkMetadata.pinnedProvider(checkpoint, hadoopConf)
    val onTtlstate = pinned.getOrElse(provider) == ProviderClass
    // transformWithState runs on Spark's RocksDB provider (TransformWithStateRouting), which its
    // checkpoint then pins: no migration applies, and ttlstate's confs do not. Unless ttlstate
    // serves it (TransformWithStateServing, opt-in).
    val tws = plan.exists(TransformWithStateRouting.uses)
    val served = tws && TransformWithStateServing.choice(conf.getOption) == TransformWithStateServing.Ttlstate
    val routed = tws && !served

    if (provider == ProviderClass && pinned.exists(_ != ProviderClass) && !routed) {
      throw new IllegalArgumentException(
        s"[TTLSTATE_PROVIDER_PINNED] This query asks for ttlstate ($ProviderClass), but its checkpoint " +
        s"$checkpoint pins ${pinned.get} (Spark keeps the provider a query was created with, from its offset " +
        "log): it would run on that provider WITHOUT TTL and its state would keep growing. To turn TTL on " +
        s"and keep the state, stop the query and run `ttlstate migrate $checkpoint <new checkpoint>`, then " +
        "restart it on the new checkpoint. To run it on its pinned provider knowingly, set " +
        s"spark.sql.streaming.stateStore.providerClass=${pinned.get} for this query." +
        (if (served) s" (`ttlstate migrate` does not move transformWithState's state yet: start this query on a new " +
          s"checkpoint to have ttlstate serve it, or set ${ConfKeys.TRANSFORM_WITH_STATE}=rocksdb.)" else ""))
    }
    conf.getAll.foreach { case (k, v) => KeySpelling.lookalikeMessage(k, v).foreach(warn) }
    if (routed) TransformWithStateRouting.atStart(session, checkpoint, provider, pinned, ours, note, warn)
    else if (onTtlstate) {
      ours.foreach { case (k, v) => unknownKeyMessage(k, v).foreach(m => throw new IllegalArgumentException(m)) }
      LineFeatures.operatorNameMessage(ours, session.version).foreach(m => throw new IllegalArgumentException(m))
      validateValues(ours, ServerLaunch.driverPython(ours, Some(session.sparkContext.getConf)))
      plan.flatMap(watermarkMessage(ours.get(TimeSourceKey), _)).foreach(m => throw new IllegalArgumentException(m))
      KeySpelling.ttlOffNote(ours, checkpoint).foreach(note)
      if (served) TransformWithStateRouting.servedAtStart(checkpoint, ours, warn)
      if (checkpoint != null) QueryLocks.onStart(session, checkpoint) // the last check: it takes the lock
    } else if (ours.exists { case (k, _) => k != ConfKeys.PYTHON }) {
      val shown = if (provider.isEmpty) "Spark's default provider" else provider
      warn(s"ttlstate: this query (checkpoint $checkpoint) sets ttlstate confs " +
        s"(${ours.keys.toSeq.sorted.mkString(", ")}) but runs on ${pinned.getOrElse(shown)}" +
        pinned.map(_ => " (pinned by its checkpoint's offset log)").getOrElse("") +
        s": TTL is OFF for it. Set spark.sql.streaming.stateStore.providerClass=$ProviderClass" +
        pinned.map(_ => s" and run `ttlstate migrate $checkpoint <new checkpoint>` first").getOrElse("") +
        " to turn TTL on.")
    }
  }

  /** Values are validated by ttlstate's own Python rules (config/store_config.py, the ones the
   *  state server applies), run in a subprocess once per distinct set of confs. Without a usable
   *  interpreter on the driver the executors still validate them, at the first batch. */
  private def validateValues(confs: Map[String, String], python: String): Unit = {
    if (confs.isEmpty) return
    val json = Json.obj(confs.toSeq.sortBy(_._1).map { case (k, v) => k -> Json.str(v) })
    val result = validated.computeIfAbsent(json, _ => runValidator(json, python))
    result.foreach(m => throw new IllegalArgumentException(m))
  }

  /** Runs `python` (the driver's interpreter: ServerLaunch.driverPython) on the confs. */
  private def runValidator(json: String, python: String): Option[String] = {
    val outcome = Try {
      val pb = new ProcessBuilder(python, "-m", "ttlstate.config.check").redirectErrorStream(false)
      pb.redirectError(ProcessBuilder.Redirect.DISCARD)
      pb.redirectInput(ProcessBuilder.Redirect.PIPE)
      val p = pb.start()
      p.getOutputStream.write(json.getBytes(UTF_8))
      p.getOutputStream.close()
      // Wait first: an interpreter that hangs (or is stopped) never closes its output. The
      // answer is one short line, well within a pipe's buffer.
      if (!p.waitFor(20, TimeUnit.SECONDS)) { p.destroyForcibly(); throw new IllegalStateException("timed out after 20 s") }
      (p.exitValue(), new String(p.getInputStream.readAllBytes(), UTF_8).trim)
    }
    outcome match {
      case scala.util.Success((0, _)) => None
      case scala.util.Success((2, message)) if message.nonEmpty => Some(message)
      case other =>
        warn(s"ttlstate: could not validate the ttlstate confs on the driver with '$python' " +
          s"(${other.fold(e => e.getMessage, r => s"exit ${r._1}")}); the executors validate them at the " +
          "first batch. Install ttlstate for the driver's interpreter, or name one that has it with " +
          s"${ServerPython.SparkDriverPython} (or PYSPARK_DRIVER_PYTHON).")
        None
    }
  }
}
