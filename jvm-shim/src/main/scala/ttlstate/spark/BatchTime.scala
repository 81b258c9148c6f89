package ttlstate.spark

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

/** The batch timestamp of the batch that loads store version N: `batchTimestampMs` in the
 *  query's offset log `<checkpoint>/offsets/N`, which Spark writes before the batch runs. A
 *  retried or replayed batch therefore sees the same "now". For readers of versions with no
 *  offset file (the state data source), the newest offset file below N, then the wall clock. */
object BatchTime {
  private val cache = new ConcurrentHashMap[String, java.lang.Long]()
  private val Field = "\"batchTimestampMs\"\\s*:\\s*(-?\\d+)".r

  def forVersion(stateRoot: String, version: Long, hadoopConf: Configuration): Long = {
    val offsets = new Path(new Path(stateRoot).getParent, "offsets")
    read(offsets, version, hadoopConf)
      .orElse(newestBelow(offsets, version, hadoopConf))
      .getOrElse(System.currentTimeMillis())
  }

  private def read(offsets: Path, batch: Long, hadoopConf: Configuration): Option[Long] = {
    val key = s"$offsets/$batch"
    Option(cache.get(key)).map(_.longValue).orElse {
      Try {
        val path = new Path(offsets, batch.toString)
        val fs = path.getFileSystem(hadoopConf)
        val in = fs.open(path)
        val text = try new String(in.readAllBytes(), UTF_8) finally in.close()
        Field.findFirstMatchIn(text).map(_.group(1).toLong)
      }.toOption.flatten.map { ts => cache.put(key, ts); ts }
    }
  }

  private def newestBelow(offsets: Path, version: Long, hadoopConf: Configuration): Option[Long] = Try {
    val fs = offsets.getFileSystem(hadoopConf)
    fs.listStatus(offsets).toSeq.map(_.getPath.getName).flatMap(n => Try(n.toLong).toOption)
      .filter(_ < version).sorted.lastOption
  }.toOption.flatten.flatMap(b => read(offsets, b, hadoopConf))
}
