package ttlstate.spark

import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkExec
import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.TransformWithStateExec

/** Spark 4.2 and 4.3's transformWithState operators check the provider class against the one
 *  they accept (`validateStateStoreProvider`, when a batch's plan executes). A streaming one in a
 *  query served by ttlstate is replaced by a subclass that also accepts ttlstate's provider
 *  (`TransformWithStateServing`, after Spark's own planning of the batch); every other check and
 *  all behaviour are Spark's. Copies keep the subclass: a new child (`withNewChildrenInternal`)
 *  by the override, a copy of other fields (`makeCopy`) by its constructor, which takes the
 *  operator's own fields in their order (per line: `AdmittingOperators.scala`). */
object TransformWithStateGate {
  def admit(plan: SparkPlan): SparkPlan = plan.transformUp {
    case t: TransformWithStateExec if t.isStreaming && !t.isInstanceOf[AdmitsTtlstate] => AdmittingTransformWithStateExec(t)
    case p: TransformWithStateInPySparkExec if p.isStreaming && !p.isInstanceOf[AdmitsTtlstateInPySpark] =>
      AdmittingTransformWithStateInPySparkExec(p)
  }
}

/** What the subclass of `TransformWithStateExec` changes: ttlstate's provider is accepted, and
 *  it is unequal to the operator it replaces (a case class equals any subclass with its fields),
 *  or a plan transformation would keep the original as unchanged. */
trait AdmitsTtlstate extends TransformWithStateExec {
  override protected def validateStateStoreProvider(isStreaming: Boolean): Unit =
    if (!TransformWithStateServing.admits(conf)) super.validateStateStoreProvider(isStreaming)
  override def canEqual(that: Any): Boolean = that.isInstanceOf[AdmitsTtlstate]
  override def equals(that: Any): Boolean = that.isInstanceOf[AdmitsTtlstate] && super.equals(that)
  override def hashCode(): Int = super.hashCode()
}

/** `AdmitsTtlstate` for PySpark's operator. */
trait AdmitsTtlstateInPySpark extends TransformWithStateInPySparkExec {
  override protected def validateStateStoreProvider(isStreaming: Boolean): Unit =
    if (!TransformWithStateServing.admits(conf)) super.validateStateStoreProvider(isStreaming)
  override def canEqual(that: Any): Boolean = that.isInstanceOf[AdmitsTtlstateInPySpark]
  override def equals(that: Any): Boolean = that.isInstanceOf[AdmitsTtlstateInPySpark] && super.equals(that)
  override def hashCode(): Int = super.hashCode()
}
