package ttlstate.metadata

import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

/** What the query's offset log says about the batch that loads store version N: its
 *  `batchTimestampMs` and `batchWatermarkMs` in `<checkpoint>/offsets/N`, which Spark writes
 *  before the batch runs, and the `batchTimestampMs` of batch N - 1 (-1: none). A retried or
 *  replayed batch therefore sees the same values; the state server turns them into the store's
 *  time by the configured time source (python/ttlstate/ttl/clock.py). */
final case class BatchClock(timestampMs: Long, watermarkMs: Long, previousTimestampMs: Long)

/** Reads `BatchClock`s. For readers of versions with no offset file (the state data source),
 *  the newest offset file below N, then the wall clock. Entries are cached per query run
 *  (`runId`): a restarted query re-reads its offset log, which may have been rewritten in
 *  between (a batch deleted to be planned again). */
object BatchTime {
  private final case class Entry(timestampMs: Long, watermarkMs: Long)
  private val cache = new ConcurrentHashMap[String, Entry]()
  // Every store of a batch reads the same two entries; a JVM that runs for months must not keep
  // one per batch it ever ran.
  private val MaxCached = 4096

  def forVersion(stateRoot: String, version: Long, runId: String, hadoopConf: Configuration): BatchClock = {
    val offsets = new Path(new Path(stateRoot).getParent, "offsets")
    read(offsets, version, runId, hadoopConf) match {
      case Some(e) =>
        val previous = if (version > 0) read(offsets, version - 1, runId, hadoopConf).map(_.timestampMs) else None
        BatchClock(e.timestampMs, e.watermarkMs, previous.getOrElse(-1L))
      case None =>
        val e = newestBelow(offsets, version, runId, hadoopConf).getOrElse(Entry(System.currentTimeMillis(), 0L))
        BatchClock(e.timestampMs, e.watermarkMs, -1L)
    }
  }

  private def read(offsets: Path, batch: Long, runId: String, hadoopConf: Configuration): Option[Entry] = {
    val key = s"$runId|$offsets/$batch"
    Option(cache.get(key)).orElse {
      Try {
        val path = new Path(offsets, batch.toString)
        SparkMetadata.offsetClock(SparkMetadata.readText(path.getFileSystem(hadoopConf), path))
          .map { case (ts, watermark) => Entry(ts, watermark) }
      }.toOption.flatten.map { e =>
        if (cache.size > MaxCached) cache.clear() // only the newest batches are read again
        cache.put(key, e)
        e
      }
    }
  }

  private def newestBelow(offsets: Path, version: Long, runId: String, hadoopConf: Configuration): Option[Entry] = Try {
    val fs = offsets.getFileSystem(hadoopConf)
    fs.listStatus(offsets).toSeq.map(_.getPath.getName).flatMap(n => Try(n.toLong).toOption)
      .filter(_ < version).sorted.lastOption
  }.toOption.flatten.flatMap(b => read(offsets, b, runId, hadoopConf))
}
