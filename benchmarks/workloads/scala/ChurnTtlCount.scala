package ttlstate.bench

import java.time.Duration

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.streaming.{ExpiredTimerInfo, ListState, OutputMode, StatefulProcessor, StreamingQuery,
  TTLConfig, TimeMode, TimerValues, Trigger, ValueState}

/** A count per key in a `ValueState` that Spark itself expires `ttlMs` after its last update:
  * what a Scala user picks for state TTL without ttlstate (`transformWithState` + `TTLConfig`).
  * Each update also moves the key's processing-time timer to `ttlMs` later (its earlier timer
  * listed and deleted), and the timer, when it fires, emits the key with 0: a session's end
  * announced, its count (expired at the same time) removed by Spark's TTL. So every key that
  * goes quiet has a timer fire and a value expire. */
class TtlCount(ttlMs: Long) extends StatefulProcessor[String, String, (String, Long)] {
  @transient private var count: ValueState[Long] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    count = getHandle.getValueState[Long]("count", Encoders.scalaLong, TTLConfig(Duration.ofMillis(ttlMs)))

  override def handleInputRows(key: String, rows: Iterator[String],
                               timerValues: TimerValues): Iterator[(String, Long)] = {
    val n = (if (count.exists()) count.get() else 0L) + rows.size
    count.update(n)
    getHandle.listTimers().toList.foreach(getHandle.deleteTimer)
    getHandle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + ttlMs)
    Iterator.single((key, n))
  }

  override def handleExpiredTimer(key: String, timerValues: TimerValues,
                                  expiredTimerInfo: ExpiredTimerInfo): Iterator[(String, Long)] =
    Iterator.single((key, 0L))
}

/** The rows of each key appended to a `ListState` that Spark expires `ttlMs` after each append
  * (`appendList`, never read back: an event log per key), the key's timer moved as in
  * [[TtlCount]]: what a ListState's appends cost, each one a merge in the store. */
class TtlEventLog(ttlMs: Long) extends StatefulProcessor[String, String, (String, Long)] {
  @transient private var events: ListState[String] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    events = getHandle.getListState[String]("events", Encoders.STRING, TTLConfig(Duration.ofMillis(ttlMs)))

  override def handleInputRows(key: String, rows: Iterator[String],
                               timerValues: TimerValues): Iterator[(String, Long)] = {
    val appended = rows.toArray
    events.appendList(appended)
    getHandle.listTimers().toList.foreach(getHandle.deleteTimer)
    getHandle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + ttlMs)
    Iterator.single((key, appended.length.toLong))
  }

  override def handleExpiredTimer(key: String, timerValues: TimerValues,
                                  expiredTimerInfo: ExpiredTimerInfo): Iterator[(String, Long)] =
    Iterator.single((key, 0L))
}

/** The churn benchmark's Scala query, started from Python through py4j: the same query on
  * whichever provider the session has (Spark's RocksDB provider, or ttlstate's store when the
  * session serves transformWithState from it). */
object ChurnTws {
  def start(spark: SparkSession, inputDir: String, checkpoint: String, ttlMs: Long): StreamingQuery =
    run(spark, inputDir, checkpoint, new TtlCount(ttlMs))

  /** The same with each key's rows appended to a ListState ([[TtlEventLog]]). */
  def startList(spark: SparkSession, inputDir: String, checkpoint: String, ttlMs: Long): StreamingQuery =
    run(spark, inputDir, checkpoint, new TtlEventLog(ttlMs))

  private def run(spark: SparkSession, inputDir: String, checkpoint: String,
                  processor: StatefulProcessor[String, String, (String, Long)]): StreamingQuery = {
    import spark.implicits._
    spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1).parquet(inputDir)
      .as[String].groupByKey(identity)
      .transformWithState(processor, TimeMode.ProcessingTime(), OutputMode.Update())
      .writeStream.format("noop").outputMode("update").option("checkpointLocation", checkpoint)
      .trigger(Trigger.AvailableNow()).start()
  }
}
