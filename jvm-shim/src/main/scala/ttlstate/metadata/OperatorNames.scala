package ttlstate.metadata

import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import ttlstate.client.Json

/** The names of a query's stateful operators by operator id ("dedupe", "stateStoreSave", ...:
 *  `operatorName` in progress), from the state metadata Spark 4.3 writes for every stateful
 *  operator while planning a run's first batch, before any of its tasks:
 *  `<checkpoint>/state/<operatorId>/_metadata/metadata`, a line `v1` and then one JSON object
 *  `{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},"stateStoreInfo":[...]}`.
 *
 *  The state server matches `operator.<name>.ttl` keys with them (and refuses a name that
 *  several operators of the query have), and logs them. Read once per checkpoint and query run
 *  in an executor (one listing and one small file per operator); an operator whose file cannot
 *  be read is left out, and the server then refuses `operator.<name>.ttl` keys for it, naming
 *  the file. */
object OperatorNames {
  private val cache = new ConcurrentHashMap[(String, String), Map[Long, String]]()
  private val MaxCached = 256

  /** The names for the state root `stateRoot` (`<checkpoint>/state`); cached per query run. */
  def of(stateRoot: String, runId: Option[String], hadoopConf: Configuration): Map[Long, String] =
    runId match {
      case Some(run) =>
        val key = (stateRoot, run)
        val known = cache.get(key)
        if (known != null) known
        else {
          val names = read(stateRoot, hadoopConf)
          if (cache.size >= MaxCached) cache.clear() // one entry per query run: bounded, not an LRU
          cache.putIfAbsent(key, names)
          names
        }
      case None => read(stateRoot, hadoopConf)
    }

  def read(stateRoot: String, hadoopConf: Configuration): Map[Long, String] = {
    val root = new Path(stateRoot)
    Try {
      val fs = root.getFileSystem(hadoopConf)
      val ids = fs.listStatus(root).toSeq.filter(_.isDirectory).map(_.getPath.getName)
        .filter(n => n.nonEmpty && n.length < 19 && n.forall(_.isDigit))
      ids.flatMap(id => Try(SparkMetadata.readText(fs, new Path(root, s"$id/_metadata/metadata"))).toOption
        .flatMap(SparkMetadata.operatorName)).toMap
    }.getOrElse(Map.empty)
  }

  /** JSON `{"<id>":"<name>",...}`, as the OPEN info carries it. */
  def json(names: Map[Long, String]): String =
    Json.obj(names.toSeq.sortBy(_._1).map { case (id, name) => id.toString -> Json.str(name) })
}
