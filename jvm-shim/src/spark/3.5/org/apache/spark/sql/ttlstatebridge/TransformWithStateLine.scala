package org.apache.spark.sql.ttlstatebridge

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.streaming.StreamingQuery

/** Spark 3.5 has no transformWithState (it came with 4.0): nothing to route. */
object TransformWithStateLine {
  def uses(plan: LogicalPlan): Boolean = false
  def stream(query: StreamingQuery): Option[(LogicalPlan, SparkSession)] = None
}
