package ttlstate.metadata

import java.nio.charset.StandardCharsets.UTF_8

import scala.jdk.CollectionConverters._
import scala.util.Try

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.spark.sql.internal.SQLConf

/** The one reader of the files Spark writes into a checkpoint, with the Jackson that Spark
 *  ships: the query's `metadata` (`{"id":...}`), offset log entries (`offsets/N`: a version line,
 *  then `{"batchWatermarkMs":..,"batchTimestampMs":..,"conf":{..}}`, then the sources' offsets)
 *  and operator metadata (`state/<op>/_metadata/metadata`: a version line, then
 *  `{"operatorInfo":{"operatorId":..,"operatorName":..},"stateStoreInfo":[..]}`). The parsers of
 *  texts are pure; the callers cache. */
object SparkMetadata {
  val ProviderKey: String = SQLConf.STATE_STORE_PROVIDER_CLASS.key
  val HdfsProvider = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
  private val mapper = new ObjectMapper()

  def readText(fs: FileSystem, path: Path): String = {
    val in = fs.open(path)
    try new String(in.readAllBytes(), UTF_8) finally in.close()
  }

  /** The numbered entries of a log directory (`offsets/`, `commits/`), ascending; none if absent. */
  def batchIds(fs: FileSystem, dir: Path): Seq[Long] =
    if (!fs.exists(dir)) Nil
    else fs.listStatus(dir).toSeq.map(_.getPath.getName).flatMap(n => Try(n.toLong).toOption).sorted

  /** The JSON object on line `index` of a text (None if there is none, or it does not parse). */
  def jsonLine(text: String, index: Int): Option[JsonNode] = {
    val lines = text.split("\n")
    if (lines.length <= index) None else Try(mapper.readTree(lines(index))).toOption.filter(_ != null)
  }

  private def long(node: JsonNode, field: String): Option[Long] =
    Option(node.get(field)).filter(_.canConvertToLong).map(_.asLong)

  /** The query id in a checkpoint's `metadata` file. */
  def queryId(text: String): Option[String] =
    Try(mapper.readTree(text)).toOption.flatMap(n => Option(n).flatMap(n => Option(n.get("id")))).filter(_.isTextual)
      .map(_.asText)

  /** An offset log entry's (batchTimestampMs, batchWatermarkMs; 0 if absent). */
  def offsetClock(text: String): Option[(Long, Long)] =
    jsonLine(text, 1).flatMap(m => long(m, "batchTimestampMs").map(ts => ts -> long(m, "batchWatermarkMs").getOrElse(0L)))

  /** The conf map an offset log entry pins (its metadata line's `conf`); throws if that line is
   *  not JSON. */
  def offsetConfs(text: String): Map[String, String] = {
    val lines = text.split("\n")
    Option(if (lines.length < 2) null else mapper.readTree(lines(1))).flatMap(m => Option(m.get("conf")))
      .map(conf => mapper.convertValue(conf, classOf[java.util.Map[String, Object]]).asScala
        .map { case (k, v) => k -> String.valueOf(v) }.toMap)
      .getOrElse(Map.empty)
  }

  /** The conf map the offset log entry `offsetFile` pins. */
  def pinnedConfs(fs: FileSystem, offsetFile: Path): Map[String, String] = offsetConfs(readText(fs, offsetFile))

  /** The provider class the newest offset log entry of `checkpoint` pins, if any. */
  def pinnedProvider(checkpoint: String, hadoopConf: Configuration): Option[String] = Try {
    val offsets = new Path(new Path(checkpoint), "offsets")
    val fs = offsets.getFileSystem(hadoopConf)
    batchIds(fs, offsets).lastOption.map(b => pinnedConfs(fs, new Path(offsets, b.toString)))
      .map(_.getOrElse(ProviderKey, HdfsProvider))
  }.toOption.flatten

  /** (operator id, name) of a v1 operator metadata file's text. */
  def operatorName(text: String): Option[(Long, String)] = {
    val lines = text.split("\n").map(_.trim).filter(_.nonEmpty)
    if (lines.length < 2 || lines(0) != "v1") None
    else for {
      info <- jsonLine(lines.mkString("\n"), 1).flatMap(m => Option(m.get("operatorInfo")))
      id <- long(info, "operatorId")
      name <- Option(info.get("operatorName")).filter(_.isTextual).map(_.asText)
    } yield id -> name
  }

  /** The stores a v1 operator metadata file lists: (store name, numColsPrefixKey, numPartitions). */
  def operatorStores(text: String): Option[Seq[(String, Int, Int)]] =
    jsonLine(text, text.split("\n").length - 1).flatMap(m => Option(m.get("stateStoreInfo"))).map { stores =>
      (0 until stores.size).map { i =>
        val s = stores.get(i)
        (s.get("storeName").asText(), s.get("numColsPrefixKey").asInt(), s.get("numPartitions").asInt())
      }
    }
}
