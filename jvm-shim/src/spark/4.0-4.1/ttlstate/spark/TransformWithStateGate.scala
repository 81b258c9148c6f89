package ttlstate.spark

import org.apache.spark.sql.execution.SparkPlan

/** Spark 4.0 and 4.1's transformWithState operators do not check the provider class (their stores'
 *  column families are their only requirement): nothing to admit. */
object TransformWithStateGate {
  def admit(plan: SparkPlan): SparkPlan = plan
}
