package ttlstate.bench

import java.time.Duration

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.streaming.{ExpiredTimerInfo, OutputMode, StatefulProcessor, StreamingQuery, TTLConfig,
  TimeMode, TimerValues, Trigger, ValueState}

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

/** The churn benchmark's Scala query, started from Python through py4j: the same query on
  * whichever provider the session has (Spark's RocksDB provider, or ttlstate's store when the
  * session serves transformWithState from it). */
object ChurnTws {
  def start(spark: SparkSession, inputDir: String, checkpoint: String, ttlMs: Long): StreamingQuery = {
    import spark.implicits._
    spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1).parquet(inputDir)
      .as[String].groupByKey(identity)
      .transformWithState(new TtlCount(ttlMs), TimeMode.ProcessingTime(), OutputMode.Update())
      .writeStream.format("noop").outputMode("update").option("checkpointLocation", checkpoint)
      .trigger(Trigger.AvailableNow()).start()
  }
}
