package org.apache.spark.sql.ttlstatebridge

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, TransformWithState, TransformWithStateInPySpark}
import org.apache.spark.sql.execution.streaming.runtime.StreamingQueryWrapper
import org.apache.spark.sql.streaming.StreamingQuery

/** Spark 4.1 to 4.3's transformWithState: the logical nodes of its Scala API and of PySpark's
 *  (one node for `transformWithStateInPandas` and the row-based `transformWithState`), and where
 *  a running query keeps the session its batches run in (`StreamExecution.sparkSessionForStream`,
 *  visible inside Spark's `sql` package only, hence this package; 4.1 moved the class into
 *  `streaming.runtime`). `ttlstate.spark.TransformWithStateRouting`'s per-line part. */
object TransformWithStateLine {
  def uses(plan: LogicalPlan): Boolean = plan.exists {
    case _: TransformWithState | _: TransformWithStateInPySpark => true
    case _ => false
  }

  /** A running query's analyzed plan and its own session (a clone of the one that started it). */
  def stream(query: StreamingQuery): Option[(LogicalPlan, SparkSession)] = query match {
    case w: StreamingQueryWrapper => Some((w.streamingQuery.analyzedPlan, w.streamingQuery.sparkSessionForStream))
    case _ => None
  }
}
