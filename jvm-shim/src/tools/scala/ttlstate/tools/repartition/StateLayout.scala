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

  /** transformWithState's operator metadata (v2, one file per batch that changed it, the newest
   *  describing the checkpoint's state): the operator's name, and each store's name,
   *  numColsPrefixKey and schema file (the column families). */
  private def v2Stores(fs: FileSystem, v2: Path): Option[(Option[String], Seq[(String, Int, String)])] =
    SparkMetadata.batchIds(fs, v2).lastOption.flatMap { batch =>
      val text = SparkMetadata.readText(fs, new Path(v2, batch.toString))
      SparkMetadata.jsonLine(text, text.split("\n").length - 1).map { m =>
        val name = Option(m.get("operatorInfo")).flatMap(i => Option(i.get("operatorName"))).map(_.asText())
        val stores = Option(m.get("stateStoreInfo")).toSeq.flatMap(s => (0 until s.size).map(s.get)).map { s =>
          // 4.0 names one schema file; later lines every one since the query started, the newest last
          val files = Option(s.get("stateSchemaFilePaths")).toSeq.flatMap(p => (0 until p.size).map(p.get(_).asText())) ++
            Option(s.get("stateSchemaFilePath")).filter(!_.isNull).map(_.asText())
          (s.get("storeName").asText(), s.get("numColsPrefixKey").asInt(), files.lastOption.getOrElse(""))
        }
        name -> stores
      }
    }

  /** Store names with their numColsPrefixKey (-1: not recorded) and schema file of column
   *  families ("" for none), and, from metadata, the operator's name. */
  private def stores(fs: FileSystem, op: Path, partitions: Seq[Int]): (Option[String], Int, Seq[(String, Int, String)]) = {
    val v1 = new Path(op, "_metadata/metadata")
    val v2 = new Path(op, "_metadata/v2")
    val fromV2 = if (fs.exists(v1)) None else v2Stores(fs, v2)
    if (fromV2.isDefined) (fromV2.get._1, 2, fromV2.get._2)
    else if (fs.exists(v1)) {
      val text = SparkMetadata.readText(fs, v1)
      val listed = SparkMetadata.operatorStores(text).getOrElse(Nil).map { case (n, prefix, _) => (n, prefix, "") }
      (SparkMetadata.operatorName(text).map(_._2), if (fs.exists(v2)) 2 else 1, listed)
    } else {
      val first = new Path(op, partitions.headOption.getOrElse(0).toString)
      val found = if (!fs.exists(first)) Nil else fs.listStatus(first).toSeq.flatMap { s =>
        val name = s.getPath.getName
        if (s.isDirectory && !name.startsWith("_") && !name.startsWith(".")) Some(name)
        else if (s.isFile && !name.startsWith(".")) Some("default") else None
      }.distinct.sorted
      (None, if (fs.exists(v2)) 2 else 0, found.map(n => (n, -1, "")))
    }
  }

  /** The column families a schema file lists (SchemaFile.familiesJson), none without one. */
  private def families(fs: FileSystem, schemaFile: String): Seq[String] =
    if (schemaFile.isEmpty) Nil
    else {
      val path = new Path(schemaFile)
      val in = path.getFileSystem(fs.getConf).open(path)
      try SchemaFile.familiesJson(in) finally in.close()
    }

  def describe(stateRoot: String, hadoopConf: Configuration): String = {
    val root = new Path(stateRoot)
    val fs = root.getFileSystem(hadoopConf)
    val operators = (if (fs.exists(root)) fs.listStatus(root).toSeq else Nil).filter(_.isDirectory)
      .flatMap(s => Try(s.getPath.getName.toLong).toOption.map(_ -> s.getPath)).sortBy(_._1).map { case (id, op) =>
        val partitions = numbered(fs, op)
        val (name, metadata, found) = stores(fs, op, partitions)
        val storesJson = found.map { case (store, prefix, schemaFile) =>
          val schema = schemas(fs, storeDir(op, partitions.headOption.getOrElse(0), store))
          val (size, count) = partitions.map(p => bytes(fs, storeDir(op, p, store)))
            .foldLeft((0L, 0)) { case ((a, b), (c, d)) => (a + c, b + d) }
          Json.obj(Seq("name" -> Json.str(store), "numColsPrefixKey" -> prefix.toString,
            "keySchema" -> schema.map(s => Json.str(s._1.json)).getOrElse("null"),
            "valueSchema" -> schema.map(s => Json.str(s._2.json)).getOrElse("null"),
            "bytes" -> size.toString, "files" -> count.toString, "schemaFile" -> Json.str(schemaFile),
            "families" -> families(fs, schemaFile).mkString("[", ",", "]")))
        }
        Json.obj(Seq("id" -> id.toString, "name" -> name.map(Json.str).getOrElse("null"),
          "metadataVersion" -> metadata.toString, "partitions" -> partitions.mkString("[", ",", "]"),
          "stores" -> storesJson.mkString("[", ",", "]")))
      }
    Json.obj(Seq("operators" -> operators.mkString("[", ",", "]")))
  }
}
