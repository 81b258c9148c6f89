package ttlstate.spark

import org.apache.spark.sql.execution.streaming.state.{StateStoreCustomMetric, StateStoreCustomSizeMetric, StateStoreCustomSumMetric, StateStoreCustomTimingMetric}

/** The custom metrics as Spark declares them (from an uninitialised provider, so static); the
 *  names, kinds and descriptions are MetricNames, generated from python/ttlstate/store/metric_names.py.
 *
 *  `numRemovedStateRows` is the name of the stateful operator's own metric: Spark merges the
 *  provider's custom metrics into the operator's metric map by name, after its own, so it is the
 *  same SQLMetric and the TTL removals the store reports add to progress's `numRowsRemoved`. */
object Metrics {
  val all: Seq[StateStoreCustomMetric] = MetricNames.defs.map {
    case (name, "sum", desc) => StateStoreCustomSumMetric(name, desc)
    case (name, "size", desc) => StateStoreCustomSizeMetric(name, desc)
    case (name, _, desc) => StateStoreCustomTimingMetric(name, desc)
  }
  val byName: Map[String, StateStoreCustomMetric] = all.map(m => m.name -> m).toMap
  def kinds: Seq[(String, String)] = MetricNames.defs.map(d => d._1 -> d._2)
}
