package org.apache.spark.sql.ttlstatebridge

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, TransformWithState, TransformWithStateInPandas}
import org.apache.spark.sql.execution.streaming.{StreamExecution, StreamingQueryWrapper}
import org.apache.spark.sql.streaming.StreamingQuery

/** Spark 4.0's transformWithState: the logical nodes of its Scala API and of PySpark's
 *  `transformWithStateInPandas`, and where a running query keeps the session its batches run in.
 *  `ttlstate.spark.TransformWithStateRouting`'s per-line part. */
object TransformWithStateLine {
  def uses(plan: LogicalPlan): Boolean = plan.exists {
    case _: TransformWithState | _: TransformWithStateInPandas => true
    case _ => false
  }

  // `StreamExecution.sparkSessionForStream` is `protected` in 4.0 (4.1 opened it to Spark's `sql`
  // package): read through its JVM accessor, which is public.
  private val sessionForStream = classOf[StreamExecution].getMethod("sparkSessionForStream")

  /** A running query's analyzed plan and its own session (a clone of the one that started it). */
  def stream(query: StreamingQuery): Option[(LogicalPlan, SparkSession)] = query match {
    case w: StreamingQueryWrapper =>
      Some((w.streamingQuery.analyzedPlan, sessionForStream.invoke(w.streamingQuery).asInstanceOf[SparkSession]))
    case _ => None
  }
}
