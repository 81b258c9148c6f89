package ttlstate.spark

import org.apache.spark.sql.execution.SparkPlan

/** Nothing to admit: Spark 3.5 has no transformWithState, and 4.0 and 4.1's operators do not
 *  check the provider class (their stores' column families are their only requirement). */
object TransformWithStateGate {
  def admit(plan: SparkPlan): SparkPlan = plan
}
