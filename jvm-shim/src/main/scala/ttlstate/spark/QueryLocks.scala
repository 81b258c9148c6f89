package ttlstate.spark

import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.streaming.StreamingQueryListener
import org.apache.spark.sql.streaming.StreamingQueryListener.{QueryProgressEvent, QueryStartedEvent, QueryTerminatedEvent}

/** Each query run of a session with ttlstate's extension holds its checkpoint's CheckpointLock
 *  from `start()` until it terminates. The lock is taken by the start checks, on the thread that
 *  starts the query and before Spark knows the run; a listener of the session learns the run when
 *  it starts (Spark tells a session's listeners synchronously, before `start()` returns) and gives
 *  its share back when it terminates. Sessions are held weakly: a session that is gone holds no
 *  lock and costs nothing. */
object QueryLocks {
  private final case class Run(checkpoint: String, hadoopConf: Configuration, owner: String)
  private val sessions = java.util.Collections.synchronizedMap(new java.util.WeakHashMap[SparkSession, java.lang.Boolean]())
  private val runs = new ConcurrentHashMap[UUID, Run]()
  private val unlocked = ConcurrentHashMap.newKeySet[UUID]() // runs that started without the lock

  /** At `start()`: the run's share of the lock (throws CheckpointLock.Locked if a tool holds it). */
  def onStart(session: SparkSession, checkpoint: String): Unit = {
    val sc = session.sparkContext
    if (sessions.putIfAbsent(session, java.lang.Boolean.TRUE) == null) session.streams.addListener(new Listener(session))
    CheckpointLock.queryStarting(checkpoint, owner(session), sc.hadoopConfiguration)
  }

  private def owner(session: SparkSession): String = CheckpointLock.describe(
    s"a streaming query of application ${session.sparkContext.applicationId} (${session.sparkContext.appName})")

  /** Whether the run `runId` is active in a session with ttlstate's checks. */
  def active(runId: UUID): Boolean = sessions.synchronized {
    sessions.keySet().toArray(Array.empty[SparkSession]).exists(s => s.streams.active.exists(_.runId == runId))
  }

  /** The checkpoint of the query `id` of `session` as its run resolved it. */
  private def checkpointOf(session: SparkSession, id: UUID): Option[String] = Try {
    val wrapper = session.streams.get(id)
    val execution = wrapper.getClass.getMethod("streamingQuery").invoke(wrapper)
    execution.getClass.getMethod("resolvedCheckpointRoot").invoke(execution).toString
  }.toOption

  private final class Listener(session: SparkSession) extends StreamingQueryListener {
    override def onQueryStarted(event: QueryStartedEvent): Unit = checkpointOf(session, event.id).foreach { ck =>
      val run = Run(ck, session.sparkContext.hadoopConfiguration, owner(session))
      runs.put(event.runId, run)
      if (!CheckpointLock.runStarted(run.checkpoint, event.runId, run.hadoopConf)) unlocked.add(event.runId)
    }

    override def onQueryProgress(event: QueryProgressEvent): Unit = {
      val runId = event.progress.runId
      if (unlocked.contains(runId)) Option(runs.get(runId)).foreach { r =>
        if (CheckpointLock.retake(r.checkpoint, runId, r.owner, r.hadoopConf)) unlocked.remove(runId)
      }
    }

    override def onQueryTerminated(event: QueryTerminatedEvent): Unit = {
      unlocked.remove(event.runId)
      Option(runs.remove(event.runId)).foreach(r => CheckpointLock.runEnded(r.checkpoint, event.runId, r.hadoopConf))
      CheckpointLock.settleAll()
    }
  }
}
