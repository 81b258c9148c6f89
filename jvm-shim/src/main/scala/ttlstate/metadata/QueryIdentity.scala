package ttlstate.metadata

import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path

/** The id of the query that owns a checkpoint: `id` in `<checkpoint>/metadata`, which Spark
 *  writes once and keeps across restarts. The server writes it into every state file and
 *  refuses a file of another query (two queries sharing a path, a copy gone wrong). Read once
 *  per checkpoint and JVM; unknown (no metadata file) means "not compared". */
object QueryIdentity {
  private val cache = new ConcurrentHashMap[String, Option[String]]()

  def forStateRoot(stateRoot: String, hadoopConf: Configuration): Option[String] =
    cache.computeIfAbsent(stateRoot, _ => Try {
      val path = new Path(new Path(stateRoot).getParent, "metadata")
      SparkMetadata.queryId(SparkMetadata.readText(path.getFileSystem(hadoopConf), path))
    }.toOption.flatten)
}
