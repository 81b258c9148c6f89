package ttlstate.spark

import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression}
import org.apache.spark.sql.catalyst.plans.logical.TransformWithStateInPySpark
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkExec
import org.apache.spark.sql.execution.streaming.operators.stateful.StatefulOperatorStateInfo
import org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate.TransformWithStateExec
import org.apache.spark.sql.streaming.{OutputMode, StatefulProcessor, TimeMode}
import org.apache.spark.sql.types.StructType

/** Spark 4.2's constructors of the subclasses `TransformWithStateGate` puts in place of its
 *  transformWithState operators: each takes the operator's own fields in their order. */
final class AdmittingTransformWithStateExec(keyDeserializer: Expression, valueDeserializer: Expression,
    groupingAttributes: Seq[Attribute], dataAttributes: Seq[Attribute], statefulProcessor: StatefulProcessor[Any, Any, Any],
    timeMode: TimeMode, outputMode: OutputMode, keyEncoder: ExpressionEncoder[Any], outputObjAttr: Attribute,
    stateInfo: Option[StatefulOperatorStateInfo], batchTimestampMs: Option[Long], prevBatchTimestampMs: Option[Long],
    eventTimeWatermarkForLateEvents: Option[Long], eventTimeWatermarkForEviction: Option[Long], child: SparkPlan,
    isStreaming: Boolean, hasInitialState: Boolean, initialStateGroupingAttrs: Seq[Attribute],
    initialStateDataAttrs: Seq[Attribute], initialStateDeserializer: Expression, initialState: SparkPlan)
  extends TransformWithStateExec(keyDeserializer, valueDeserializer, groupingAttributes, dataAttributes,
    statefulProcessor, timeMode, outputMode, keyEncoder, outputObjAttr, stateInfo, batchTimestampMs,
    prevBatchTimestampMs, eventTimeWatermarkForLateEvents, eventTimeWatermarkForEviction, child, isStreaming,
    hasInitialState, initialStateGroupingAttrs, initialStateDataAttrs, initialStateDeserializer, initialState) with AdmitsTtlstate {
  override protected def withNewChildrenInternal(newLeft: SparkPlan, newRight: SparkPlan): TransformWithStateExec =
    AdmittingTransformWithStateExec(super.withNewChildrenInternal(newLeft, newRight))
}

object AdmittingTransformWithStateExec {
  def apply(t: TransformWithStateExec): AdmittingTransformWithStateExec = new AdmittingTransformWithStateExec(
    t.keyDeserializer, t.valueDeserializer, t.groupingAttributes, t.dataAttributes, t.statefulProcessor, t.timeMode,
    t.outputMode, t.keyEncoder, t.outputObjAttr, t.stateInfo, t.batchTimestampMs, t.prevBatchTimestampMs,
    t.eventTimeWatermarkForLateEvents, t.eventTimeWatermarkForEviction, t.child, t.isStreaming, t.hasInitialState,
    t.initialStateGroupingAttrs, t.initialStateDataAttrs, t.initialStateDeserializer, t.initialState)
}

final class AdmittingTransformWithStateInPySparkExec(functionExpr: Expression, groupingAttributes: Seq[Attribute],
    output: Seq[Attribute], outputMode: OutputMode, timeMode: TimeMode, stateInfo: Option[StatefulOperatorStateInfo],
    batchTimestampMs: Option[Long], prevBatchTimestampMs: Option[Long], eventTimeWatermarkForLateEvents: Option[Long],
    eventTimeWatermarkForEviction: Option[Long], userFacingDataType: TransformWithStateInPySpark.UserFacingDataType.Value,
    child: SparkPlan, isStreaming: Boolean, hasInitialState: Boolean, initialState: SparkPlan,
    initialStateGroupingAttrs: Seq[Attribute], initialStateSchema: StructType)
  extends TransformWithStateInPySparkExec(functionExpr, groupingAttributes, output, outputMode, timeMode, stateInfo,
    batchTimestampMs, prevBatchTimestampMs, eventTimeWatermarkForLateEvents, eventTimeWatermarkForEviction,
    userFacingDataType, child, isStreaming, hasInitialState, initialState, initialStateGroupingAttrs, initialStateSchema)
    with AdmitsTtlstateInPySpark {
  override protected def withNewChildrenInternal(newLeft: SparkPlan, newRight: SparkPlan): TransformWithStateInPySparkExec =
    AdmittingTransformWithStateInPySparkExec(super.withNewChildrenInternal(newLeft, newRight))
}

object AdmittingTransformWithStateInPySparkExec {
  def apply(p: TransformWithStateInPySparkExec): AdmittingTransformWithStateInPySparkExec =
    new AdmittingTransformWithStateInPySparkExec(p.functionExpr, p.groupingAttributes, p.output, p.outputMode,
      p.timeMode, p.stateInfo, p.batchTimestampMs, p.prevBatchTimestampMs, p.eventTimeWatermarkForLateEvents,
      p.eventTimeWatermarkForEviction, p.userFacingDataType, p.child, p.isStreaming, p.hasInitialState, p.initialState,
      p.initialStateGroupingAttrs, p.initialStateSchema)
}
