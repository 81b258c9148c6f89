package ttlstate.spark

import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.streaming.StreamingQueryListener
import org.apache.spark.sql.streaming.StreamingQueryListener.{QueryProgressEvent, QueryStartedEvent, QueryTerminatedEvent}
import ttlstate.metadata.SparkMetadata

/** Each query run of a session with ttlstate's extension holds its checkpoint's CheckpointLock
 *  from `start()` until it terminates. The lock is taken by the start checks, before Spark knows
 *  the query's id for a new checkpoint; a listener learns which run it was when the query starts
 *  (its checkpoint's `metadata` names it) and gives the lock back when that run terminates. */
object QueryLocks {
  private final case class Run(checkpoint: String, hadoopConf: Configuration)
  private val starting = new ConcurrentHashMap[Run, Integer]() // locked, not yet seen started
  private val running = new ConcurrentHashMap[UUID, List[Run]]()
  private val listening = java.util.Collections.newSetFromMap(new ConcurrentHashMap[SparkSession, java.lang.Boolean]())

  /** At `start()`: the run's share of the lock (throws CheckpointLock.Locked if a tool holds it). */
  def onStart(session: SparkSession, checkpoint: String): Unit = {
    val conf = session.sparkContext.hadoopConfiguration
    val sc = session.sparkContext
    CheckpointLock.forQuery(checkpoint, CheckpointLock.describe(
      s"a streaming query of application ${sc.applicationId} (${sc.appName})"), conf)
    if (listening.add(session)) session.streams.addListener(listener)
    starting.merge(Run(checkpoint, conf), 1, (a, b) => a + b)
  }

  private def queryId(run: Run): Option[String] = Try {
    val path = new Path(run.checkpoint, "metadata")
    SparkMetadata.queryId(SparkMetadata.readText(path.getFileSystem(run.hadoopConf), path))
  }.toOption.flatten

  private val listener = new StreamingQueryListener {
    override def onQueryStarted(event: QueryStartedEvent): Unit = starting.synchronized {
      starting.keySet().toArray(Array.empty[Run]).find(r => queryId(r).contains(event.id.toString)).foreach { r =>
        if (starting.merge(r, -1, (a, b) => a + b) == 0) starting.remove(r)
        running.merge(event.id, List(r), (a, b) => a ++ b)
      }
    }

    override def onQueryProgress(event: QueryProgressEvent): Unit = ()

    override def onQueryTerminated(event: QueryTerminatedEvent): Unit =
      Option(running.remove(event.id)).getOrElse(Nil).foreach(r => CheckpointLock.queryEnded(r.checkpoint, r.hadoopConf))
  }
}
