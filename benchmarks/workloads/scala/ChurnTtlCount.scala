package ttlstate.bench

import java.time.Duration

import org.apache.spark.sql.{Encoders, SparkSession}
import org.apache.spark.sql.streaming.{OutputMode, StatefulProcessor, StreamingQuery, TTLConfig, TimeMode,
  TimerValues, Trigger, ValueState}

/** A count per key in a `ValueState` that Spark itself expires `ttlMs` after its last update:
  * what a Scala user picks for state TTL without ttlstate (`transformWithState` + `TTLConfig`). */
class TtlCount(ttlMs: Long) extends StatefulProcessor[String, String, (String, Long)] {
  @transient private var count: ValueState[Long] = _

  override def init(outputMode: OutputMode, timeMode: TimeMode): Unit =
    count = getHandle.getValueState[Long]("count", Encoders.scalaLong, TTLConfig(Duration.ofMillis(ttlMs)))

  override def handleInputRows(key: String, rows: Iterator[String],
                               timerValues: TimerValues): Iterator[(String, Long)] = {
    val n = (if (count.exists()) count.get() else 0L) + rows.size
    count.update(n)
    Iterator.single((key, n))
  }
}

/** The churn benchmark's Scala query, started from Python through py4j. */
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
