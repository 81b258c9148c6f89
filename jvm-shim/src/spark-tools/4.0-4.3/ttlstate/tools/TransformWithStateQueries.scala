package ttlstate.tools

import java.sql.Timestamp
import java.time.Duration

import org.apache.spark.sql.{DataFrame, Encoders}
import org.apache.spark.sql.functions.col
import org.apache.spark.sql.streaming.{ExpiredTimerInfo, ListState, MapState, OutputMode, StatefulProcessor,
  StatefulProcessorWithInitialState, TimeMode, TimerValues, TTLConfig, ValueState}

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

  private val Out = Encoders.tuple(Encoders.STRING, Encoders.STRING, Encoders.scalaLong, Encoders.STRING)

  /** Processing time, per key of `events` (k STRING, v INT): every state kind, TTL and timers
   *  (`Features`); rows (key, "in" or "timer", count, what the state held). */
  def features(events: DataFrame): DataFrame = {
    val rows = events.select(col("k"), col("v")).as(Encoders.tuple(Encoders.STRING, Encoders.scalaInt))
    rows.groupByKey(_._1)(Encoders.STRING).transformWithState(new Features, TimeMode.ProcessingTime(),
      OutputMode.Update())(Out).toDF("k", "kind", "n", "state")
  }

  /** Event time, per key of `events` (k STRING, v INT, ts TIMESTAMP, with a watermark), from an
   *  initial state of counts per key (`initial`: k STRING, n LONG): a MapState and event-time
   *  timers (`EventTimers`). */
  def eventTimers(events: DataFrame, initial: DataFrame): DataFrame = {
    val rows = events.select(col("k"), col("v"), col("ts"))
      .as(Encoders.tuple(Encoders.STRING, Encoders.scalaInt, Encoders.TIMESTAMP))
    val start = initial.select(col("k"), col("n")).as(Encoders.tuple(Encoders.STRING, Encoders.scalaLong))
      .groupByKey(_._1)(Encoders.STRING)
    rows.groupByKey(_._1)(Encoders.STRING).transformWithState(new EventTimers, TimeMode.EventTime(), OutputMode.Update(),
      start)(Out, Encoders.tuple(Encoders.STRING, Encoders.scalaLong)).toDF("k", "kind", "n", "state")
  }
}

/** Processing time: a ValueState, one with a 1 ms TTLConfig (expired at any later batch), a
 *  MapState and a ListState with TTLConfigs, and a processing-time timer per batch with input,
 *  which fires at a later batch. A timer's row says only that it fired (which batch runs it
 *  depends on when batches run). */
final class Features extends StatefulProcessor[String, (String, Int), (String, String, Long, String)] {
  @transient private var seen: ValueState[Long] = _
  @transient private var recent: ValueState[Int] = _
  @transient private var perValue: MapState[Int, Long] = _
  @transient private var history: ListState[Int] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    seen = getHandle.getValueState[Long]("seen", Encoders.scalaLong, TTLConfig.NONE)
    recent = getHandle.getValueState[Int]("recent", Encoders.scalaInt, TTLConfig(Duration.ofMillis(1)))
    perValue = getHandle.getMapState[Int, Long]("perValue", Encoders.scalaInt, Encoders.scalaLong,
      TTLConfig(Duration.ofHours(1)))
    history = getHandle.getListState[Int]("history", Encoders.scalaInt, TTLConfig(Duration.ofHours(1)))
  }

  override def handleInputRows(key: String, rows: Iterator[(String, Int)],
      timerValues: TimerValues): Iterator[(String, String, Long, String)] = {
    val vs = rows.map(_._2).toArray
    val before = if (recent.exists()) recent.get() else -1
    vs.foreach(v => perValue.updateValue(v, (if (perValue.containsKey(v)) perValue.getValue(v) else 0L) + 1))
    history.appendList(vs)
    recent.update(vs.max)
    val n = (if (seen.exists()) seen.get() else 0L) + vs.length
    seen.update(n)
    getHandle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 1)
    val map = perValue.iterator().toSeq.sorted.map { case (v, c) => s"$v:$c" }.mkString(",")
    Iterator((key, "in", n, s"recent=$before map=$map list=${history.get().toSeq.sorted.mkString(",")}"))
  }

  override def handleExpiredTimer(key: String, timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[(String, String, Long, String)] = Iterator((key, "timer", 0L, ""))
}

/** Event time, from an initial count per key: the values per key (MapState) and a count
 *  (ValueState); each row sets a timer 5 s after its event time, which emits the key's state and
 *  forgets its values. */
final class EventTimers
    extends StatefulProcessorWithInitialState[String, (String, Int, Timestamp), (String, String, Long, String),
      (String, Long)] {
  @transient private var count: ValueState[Long] = _
  @transient private var values: MapState[Int, Long] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit = {
    count = getHandle.getValueState[Long]("count", Encoders.scalaLong, TTLConfig.NONE)
    values = getHandle.getMapState[Int, Long]("values", Encoders.scalaInt, Encoders.scalaLong, TTLConfig.NONE)
  }

  override def handleInitialState(key: String, initialState: (String, Long), timerValues: TimerValues): Unit =
    count.update(initialState._2)

  private def state: String = values.iterator().toSeq.sorted.map { case (v, c) => s"$v:$c" }.mkString(",")

  override def handleInputRows(key: String, rows: Iterator[(String, Int, Timestamp)],
      timerValues: TimerValues): Iterator[(String, String, Long, String)] = {
    var n = if (count.exists()) count.get() else 0L
    rows.foreach { case (_, v, ts) =>
      n += 1
      values.updateValue(v, (if (values.containsKey(v)) values.getValue(v) else 0L) + 1)
      getHandle.registerTimer(ts.getTime + 5000)
    }
    count.update(n)
    Iterator((key, "in", n, state))
  }

  override def handleExpiredTimer(key: String, timerValues: TimerValues,
      expiredTimerInfo: ExpiredTimerInfo): Iterator[(String, String, Long, String)] = {
    val out = (key, s"timer@${expiredTimerInfo.getExpiryTimeInMs()}", if (count.exists()) count.get() else 0L, state)
    values.clear()
    Iterator(out)
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
