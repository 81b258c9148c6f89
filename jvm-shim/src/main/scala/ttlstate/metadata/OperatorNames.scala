package ttlstate.metadata

import java.nio.charset.StandardCharsets.UTF_8
import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
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
  private val IdField = "\"operatorId\"\\s*:\\s*(\\d+)".r
  private val NameField = "\"operatorName\"\\s*:\\s*\"([^\"\\\\]*)\"".r

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
      ids.flatMap(id => Try(readFile(fs, new Path(root, s"$id/_metadata/metadata"))).toOption.flatMap(parse)).toMap
    }.getOrElse(Map.empty)
  }

  /** (operator id, name) of a v1 operator metadata file's text. */
  def parse(text: String): Option[(Long, String)] = {
    val lines = text.split("\n").map(_.trim).filter(_.nonEmpty)
    if (lines.length < 2 || lines(0) != "v1") None
    else for {
      id <- IdField.findFirstMatchIn(lines(1))
      name <- NameField.findFirstMatchIn(lines(1))
    } yield id.group(1).toLong -> name.group(1)
  }

  private def readFile(fs: FileSystem, path: Path): String = {
    val in = fs.open(path)
    try new String(in.readAllBytes(), UTF_8) finally in.close()
  }

  /** JSON `{"<id>":"<name>",...}`, as the OPEN info carries it. */
  def json(names: Map[Long, String]): String =
    Json.obj(names.toSeq.sortBy(_._1).map { case (id, name) => id.toString -> Json.str(name) })

  /** `java -cp <jar>:<spark jars> ttlstate.spark.OperatorNames <checkpoint>/state`: the names as
   *  JSON, for a test against a real checkpoint. */
  def main(args: Array[String]): Unit = println(json(read(args(0), new Configuration())))
}
