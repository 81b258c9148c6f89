package ttlstate.tools

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming.{ListState, OutputMode, StatefulProcessor, TimeMode, TimerValues, TTLConfig,
  ValueState}

/** transformWithState queries of Spark's Scala API, which the Python tests run in a session
 *  configured for ttlstate and compare with the same query on Spark's RocksDB provider
 *  (`tests/spark/test_transform_with_state.py`; `ttlstate.spark.tools_jar` loads this jar into a
 *  running session). Spark 4.0 and later: the API came with 4.0. */
object TransformWithStateQueries {
  /** Per key of `events` (k STRING, v INT), each batch (Update mode): the key, how many rows it has
   *  had, and the values it has had, sorted: a ValueState and a ListState per key. */
  def counts(events: DataFrame): DataFrame = {
    val rows = events.select(col("k"), col("v")).as(Encoders.tuple(Encoders.STRING, Encoders.scalaInt))
    rows.groupByKey(_._1)(Encoders.STRING)
      .transformWithState(new CountValues, TimeMode.None(), OutputMode.Update())(
        Encoders.tuple(Encoders.STRING, Encoders.scalaLong, Encoders.STRING))
      .toDF("k", "n", "values")
  }
}

/** `TransformWithStateQueries.counts`' processor. */
final class CountValues extends StatefulProcessor[String, (String, Int), (String, Long, String)] {
  @transient private var count: ValueState[Long] = _
  @transient private var values: ListState[Int] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    count = getHandle.getValueState[Long]("count", Encoders.scalaLong, TTLConfig.NONE)
    values = getHandle.getListState[Int]("values", Encoders.scalaInt, TTLConfig.NONE)
  }

  override def handleInputRows(key: String, rows: Iterator[(String, Int)],
      timerValues: TimerValues): Iterator[(String, Long, String)] = {
    val seen = rows.map(_._2).toArray
    val n = (if (count.exists()) count.get() else 0L) + seen.length
    count.update(n)
    values.appendList(seen)
    Iterator((key, n, values.get().toSeq.sorted.mkString(",")))
  }
}
