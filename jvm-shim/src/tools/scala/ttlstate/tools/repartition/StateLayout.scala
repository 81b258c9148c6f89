package ttlstate.tools.repartition

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.spark.sql.types.StructType
import ttlstate.client.Json
import ttlstate.metadata.SparkMetadata

/** What a checkpoint's `state/` folder holds, per stateful operator, as `ttlstate repartition`
 *  plans from it (JSON for the Python side): the operator's name and stores from Spark's operator
 *  metadata where Spark wrote it (4.0+), else the stores found in partition 0's folder (3.5); each
 *  store's key and value schemas from Spark's schema file, and the bytes of its files. */
object StateLayout {
  private def numbered(fs: FileSystem, dir: Path): Seq[Int] =
    if (!fs.exists(dir)) Nil
    else fs.listStatus(dir).toSeq.filter(_.isDirectory).flatMap(s => Try(s.getPath.getName.toInt).toOption).sorted

  /** The folder of a store in partition `p` of operator folder `op` (Spark's StateStoreId layout). */
  def storeDir(op: Path, p: Int, store: String): Path =
    if (store == "default") new Path(op, p.toString) else new Path(new Path(op, p.toString), store)

  private def bytes(fs: FileSystem, dir: Path): (Long, Int) =
    if (!fs.exists(dir)) (0L, 0)
    else {
      val files = fs.listStatus(dir).toSeq.filter(s => s.isFile && !s.getPath.getName.startsWith("."))
      (files.map(_.getLen).sum, files.size)
    }

  /** (key schema, value schema) from Spark's schema file in a store's folder (`_metadata/schema`). */
  private def schemas(fs: FileSystem, storeDir: Path): Option[(StructType, StructType)] = {
    val file = new Path(storeDir, "_metadata/schema")
    if (!fs.exists(file)) None
    else {
      val in = fs.open(file)
      try SchemaFile.parse(in) finally in.close()
    }
  }

  /** Store names with their numColsPrefixKey (-1: not recorded) and, from metadata, the operator's name. */
  private def stores(fs: FileSystem, op: Path, partitions: Seq[Int]): (Option[String], Int, Seq[(String, Int)]) = {
    val v1 = new Path(op, "_metadata/metadata")
    val v2 = new Path(op, "_metadata/v2")
    if (fs.exists(v1)) {
      val text = SparkMetadata.readText(fs, v1)
      val listed = SparkMetadata.operatorStores(text).getOrElse(Nil).map { case (n, prefix, _) => n -> prefix }
      (SparkMetadata.operatorName(text).map(_._2), if (fs.exists(v2)) 2 else 1, listed)
    } else {
      val first = new Path(op, partitions.headOption.getOrElse(0).toString)
      val found = if (!fs.exists(first)) Nil else fs.listStatus(first).toSeq.flatMap { s =>
        val name = s.getPath.getName
        if (s.isDirectory && !name.startsWith("_") && !name.startsWith(".")) Some(name)
        else if (s.isFile && !name.startsWith(".")) Some("default") else None
      }.distinct.sorted
      (None, if (fs.exists(v2)) 2 else 0, found.map(_ -> -1))
    }
  }

  def describe(stateRoot: String, hadoopConf: Configuration): String = {
    val root = new Path(stateRoot)
    val fs = root.getFileSystem(hadoopConf)
    val operators = (if (fs.exists(root)) fs.listStatus(root).toSeq else Nil).filter(_.isDirectory)
      .flatMap(s => Try(s.getPath.getName.toLong).toOption.map(_ -> s.getPath)).sortBy(_._1).map { case (id, op) =>
        val partitions = numbered(fs, op)
        val (name, metadata, found) = stores(fs, op, partitions)
        val storesJson = found.map { case (store, prefix) =>
          val schema = schemas(fs, storeDir(op, partitions.headOption.getOrElse(0), store))
          val (size, count) = partitions.map(p => bytes(fs, storeDir(op, p, store)))
            .foldLeft((0L, 0)) { case ((a, b), (c, d)) => (a + c, b + d) }
          Json.obj(Seq("name" -> Json.str(store), "numColsPrefixKey" -> prefix.toString,
            "keySchema" -> schema.map(s => Json.str(s._1.json)).getOrElse("null"),
            "valueSchema" -> schema.map(s => Json.str(s._2.json)).getOrElse("null"),
            "bytes" -> size.toString, "files" -> count.toString))
        }
        Json.obj(Seq("id" -> id.toString, "name" -> name.map(Json.str).getOrElse("null"),
          "metadataVersion" -> metadata.toString, "partitions" -> partitions.mkString("[", ",", "]"),
          "stores" -> storesJson.mkString("[", ",", "]")))
      }
    Json.obj(Seq("operators" -> operators.mkString("[", ",", "]")))
  }
}
