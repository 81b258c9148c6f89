package ttlstate.bench

import java.time.Duration

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.streaming.{ExpiredTimerInfo, ListState, OutputMode, StatefulProcessor, StreamingQuery,
  TTLConfig, TimeMode, TimerValues, Trigger, ValueState}

/** A key's processing-time timer moved to `ttlMs` later at each update (its earlier timer
  * listed and deleted), emitting the key with 0 when it fires: a session's end announced, its
  * state (expired by Spark's TTL at the same time) removed. So every key that goes quiet has a
  * timer fire and its state expire. */
abstract class TimerPerKey(ttlMs: Long) extends StatefulProcessor[String, String, (String, Long)] {
  protected def moveTimer(timerValues: TimerValues): Unit = {
    getHandle.listTimers().toList.foreach(getHandle.deleteTimer)
    getHandle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + ttlMs)
  }

  override def handleExpiredTimer(key: String, timerValues: TimerValues,
                                  expiredTimerInfo: ExpiredTimerInfo): Iterator[(String, Long)] =
    Iterator.single((key, 0L))
}

/** A count per key in a `ValueState` that Spark itself expires `ttlMs` after its last update:
  * what a Scala user picks for state TTL without ttlstate (`transformWithState` + `TTLConfig`). */
class TtlCount(ttlMs: Long) extends TimerPerKey(ttlMs) {
  @transient private var count: ValueState[Long] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    count = getHandle.getValueState[Long]("count", Encoders.scalaLong, TTLConfig(Duration.ofMillis(ttlMs)))

  override def handleInputRows(key: String, rows: Iterator[String],
                               timerValues: TimerValues): Iterator[(String, Long)] = {
    val n = (if (count.exists()) count.get() else 0L) + rows.size
    count.update(n)
    moveTimer(timerValues)
    Iterator.single((key, n))
  }
}

/** The rows of each key appended to a `ListState` that Spark expires `ttlMs` after each append
  * (`appendList`, never read back: an event log per key): what a ListState's appends cost, each
  * one a merge in the store. */
class TtlEventLog(ttlMs: Long) extends TimerPerKey(ttlMs) {
  @transient private var events: ListState[String] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    events = getHandle.getListState[String]("events", Encoders.STRING, TTLConfig(Duration.ofMillis(ttlMs)))

  override def handleInputRows(key: String, rows: Iterator[String],
                               timerValues: TimerValues): Iterator[(String, Long)] = {
    val appended = rows.toArray
    events.appendList(appended)
    moveTimer(timerValues)
    Iterator.single((key, appended.length.toLong))
  }
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
