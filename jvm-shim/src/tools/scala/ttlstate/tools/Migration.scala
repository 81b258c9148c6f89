package ttlstate.tools

import java.io.IOException
import java.nio.charset.StandardCharsets.UTF_8

import scala.util.Try

import com.fasterxml.jackson.databind.ObjectMapper
import com.fasterxml.jackson.databind.node.ObjectNode
import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, FileUtil, Path}
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{DataType, StructType, TimestampType}
import org.apache.spark.util.SerializableConfiguration
import ttlstate.client.Json
import ttlstate.conf.ConfKeys
import ttlstate.metadata.SparkMetadata._

/** `ttlstate migrate`: a stopped query's checkpoint copied into a NEW checkpoint whose state, at
 *  the last committed batch, is held by another provider (Spark's RocksDB or HDFS provider ->
 *  ttlstate, or back). The source is only read.
 *
 *  Everything but the stores' data is copied as is (query id included: the new checkpoint
 *  continues the same query, so sinks that track the query id stay exactly once), except that
 *  every offset log entry pins the target provider. The state is copied through the provider
 *  API, one Spark task per store: the source provider (the class its offset log pins) reads the
 *  last committed version, the target provider writes it as that same version (a write store of
 *  the version before that starts empty: Spark's loadEmpty on 4.2+, and on every line ttlstate's
 *  own, `LineStores.emptyWriteStore`), and the row counts are checked: rows read, keys the target
 *  committed, and rows a fresh target provider reads back. What differs between Spark lines
 *  (the provider API, the schema files, the operator metadata 3.5 does not write) is
 *  `LineStores`, one per line. */
object Migration {
  private val mapper = new ObjectMapper()

  /** One store of the source, as a task needs it. */
  final case class StoreSpec(operatorId: Long, partitionId: Int, storeName: String, keySchemaJson: String,
      valueSchemaJson: String, numColsPrefixKey: Int) {
    def label: String = s"operator $operatorId, partition $partitionId, store $storeName"
  }

  final case class Copied(spec: StoreSpec, read: Long, committed: Long, readBack: Long)

  final class MigrationError(message: String) extends IOException(message)

  private[tools] def fail(message: String): Nothing = throw new MigrationError(message)

  private def rewriteOffsets(text: String, provider: String): String = {
    val lines = text.split("\n", -1)
    if (lines.length < 2) return text
    val meta = mapper.readTree(lines(1)).asInstanceOf[ObjectNode]
    val conf = Option(meta.get("conf")).collect { case o: ObjectNode => o }.getOrElse(meta.putObject("conf"))
    conf.put(ProviderKey, provider)
    lines(1) = mapper.writeValueAsString(meta)
    lines.mkString("\n")
  }

  private def writeText(fs: FileSystem, p: Path, text: String): Unit = {
    val out = fs.create(p, false)
    try out.write(text.getBytes(UTF_8)) finally out.close()
  }

  /** Spark's own metadata under a state directory: entries whose names start with '_'. */
  private def copySparkMetadata(fs: FileSystem, from: Path, to: Path, conf: Configuration): Unit =
    if (fs.exists(from)) fs.listStatus(from).foreach { st =>
      val name = st.getPath.getName
      if (name.startsWith("_")) FileUtil.copy(fs, st.getPath, fs, new Path(to, name), false, conf)
    }

  /** The stores of every stateful operator: from Spark's operator metadata where the checkpoint has
   *  it (Spark 4.0+), else (Spark 3.5 writes none) from the state directories; schemas from
   *  Spark's schema files. */
  private def describeStores(fs: FileSystem, stateRoot: Path, hadoopConf: Configuration): Seq[StoreSpec] = {
    if (!fs.exists(stateRoot)) return Nil
    val ops = fs.listStatus(stateRoot).toSeq.filter(_.isDirectory).map(_.getPath.getName)
      .flatMap(n => Try(n.toLong).toOption).sorted
    ops.flatMap { op =>
      val metaFile = new Path(stateRoot, s"$op/_metadata/metadata")
      val stores = if (fs.exists(metaFile)) {
        operatorStores(readText(fs, metaFile))
          .getOrElse(fail(s"cannot read the operator metadata $metaFile (operator state metadata v1 expected)"))
      } else if (!LineStores.writesOperatorMetadata) {
        storesOnDisk(fs, new Path(stateRoot, op.toString), hadoopConf, op, stateRoot)
      } else {
        fail(s"operator $op of the source has no operator metadata ($metaFile): run the query once on " +
          "this Spark before migrating it")
      }
      stores.flatMap { case (name, prefixCols, partitions) =>
        val (keySchema, valueSchema) = schemas(stateRoot, op, name, hadoopConf)
        (0 until partitions).map(p => StoreSpec(op, p, name, keySchema.json, valueSchema.json, prefixCols))
      }
    }
  }

  private def schemas(stateRoot: Path, op: Long, name: String, hadoopConf: Configuration): (StructType, StructType) =
    LineStores.schemas(stateRoot.toString, op, name, hadoopConf)
      .getOrElse(fail(s"operator $op, store $name: no state schema file under $stateRoot/$op"))

  /** A file name of a version of a store, of Spark's providers or ttlstate's. */
  private def versionFile(name: String): Boolean =
    name.matches("\\d+\\.(delta|snapshot|zip|changelog)")

  /** Without operator metadata: the stores of operator `op` as its directories hold them (the
   *  default store's files in the partition's directory, a named one's in a subdirectory: the
   *  joins'), its partitions, and the key columns it scans by prefix: a session window's (Spark's
   *  session window state key is the grouping keys and a non-null `sessionStartTime` timestamp,
   *  scanned by the grouping keys), 0 for every other operator. */
  private def storesOnDisk(fs: FileSystem, opDir: Path, hadoopConf: Configuration, op: Long,
      stateRoot: Path): Seq[(String, Int, Int)] = {
    val partitions = fs.listStatus(opDir).toSeq.filter(_.isDirectory).map(_.getPath.getName)
      .flatMap(n => Try(n.toInt).toOption).sorted
    if (partitions.isEmpty) return Nil
    val first = fs.listStatus(new Path(opDir, partitions.head.toString)).toSeq
    val named = first.filter(st => st.isDirectory && !st.getPath.getName.startsWith("_") &&
      fs.listStatus(st.getPath).exists(f => versionFile(f.getPath.getName))).map(_.getPath.getName)
    val default = if (first.exists(st => st.isFile && versionFile(st.getPath.getName))) Seq("default") else Nil
    (default ++ named.sorted).map { name =>
      val key = schemas(stateRoot, op, name, hadoopConf)._1
      val session = key.nonEmpty && key.last.name == "sessionStartTime" && key.last.dataType == TimestampType &&
        !key.last.nullable
      (name, if (session) key.length - 1 else 0, partitions.length)
    }
  }

  private def storeConf(base: SQLConf, confs: Map[String, String]): StateStoreConf = {
    val c = base.clone()
    confs.foreach { case (k, v) => c.setConfString(k, v) }
    new StateStoreConf(c)
  }

  /** Runs the migration; returns a JSON report. `targetConfs` are extra confs of the target provider. */
  def run(spark: LineStores.Session, source: String, target: String, targetProvider: String,
      targetConfs: java.util.Map[String, String]): String = {
    val hadoopConf = spark.sessionState.newHadoopConf()
    val src = new Path(source)
    val dst = new Path(target)
    val srcFs = src.getFileSystem(hadoopConf)
    val dstFs = dst.getFileSystem(hadoopConf)
    if (!srcFs.exists(new Path(src, "metadata"))) fail(s"$source is not a streaming query checkpoint (no metadata file)")
    if (dstFs.exists(dst) && dstFs.listStatus(dst).nonEmpty) {
      fail(s"the target $target exists and is not empty: migrate writes a NEW checkpoint and never overwrites one")
    }
    val commits = batchIds(srcFs, new Path(src, "commits"))
    val offsets = batchIds(srcFs, new Path(src, "offsets"))
    val last = commits.lastOption.getOrElse(fail(s"$source has no committed batch: nothing to migrate"))
    if (!offsets.contains(last)) fail(s"$source has no offset log entry for its last committed batch $last")
    val pinned = pinnedConfs(srcFs, new Path(src, s"offsets/${offsets.last}"))
    val sourceProvider = pinned.getOrElse(ProviderKey, HdfsProvider)
    if (pinned.get("spark.sql.streaming.stateStore.checkpointFormatVersion").exists(_ != "1")) {
      fail(s"$source uses state store checkpoint format version 2 (checkpoint ids); migrate supports version 1")
    }
    val stores = describeStores(srcFs, new Path(src, "state"), hadoopConf)
    val version = last + 1 // the state after the last committed batch

    copyCheckpointFiles(srcFs, src, dstFs, dst, stores, offsets, targetProvider, hadoopConf)

    val base = spark.sessionState.conf
    val common = pinned + ("spark.sql.streaming.stateStore.commitValidation.enabled" -> "false")
    val srcConf = storeConf(base, common + (ProviderKey -> sourceProvider))
    val extra = targetConfs.keySet.toArray(Array.empty[String]).map(k => k -> targetConfs.get(k)).toMap
    // A RocksDB target uploads its snapshot within the commit when changelog checkpointing is off.
    val dstConfs = common ++ extra + (ProviderKey -> targetProvider) +
      ("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled" -> "false")
    val dstConf = storeConf(base, dstConfs)
    val verifyConf = storeConf(base, dstConfs + (ConfKeys.TTL -> "off"))
    val conf = new SerializableConfiguration(hadoopConf)
    val srcState = new Path(src, "state").toString
    val dstState = new Path(dstFs.makeQualified(dst), "state").toString

    val copied = copyStores(spark, stores, s"${stores.size} stores of $source at batch $last", srcState, dstState,
      version, srcConf, dstConf, verifyConf, conf)
    dstFs.mkdirs(new Path(dst, "commits"))
    commits.foreach { b =>
      FileUtil.copy(srcFs, new Path(src, s"commits/$b"), dstFs, new Path(dst, s"commits/$b"), false, hadoopConf)
    }
    report(source, target, last, version, sourceProvider, targetProvider, copied)
  }

  /** The new checkpoint's files: the query's identity, Spark's state metadata and the offset log
   *  first (the target provider reads the query id and the batch time); the commit log comes
   *  last, once the state is copied. */
  private def copyCheckpointFiles(srcFs: FileSystem, src: Path, dstFs: FileSystem, dst: Path, stores: Seq[StoreSpec],
      offsets: Seq[Long], targetProvider: String, hadoopConf: Configuration): Unit = {
    dstFs.mkdirs(dst)
    FileUtil.copy(srcFs, new Path(src, "metadata"), dstFs, new Path(dst, "metadata"), false, hadoopConf)
    for (st <- if (srcFs.exists(new Path(src, "state"))) srcFs.listStatus(new Path(src, "state")).toSeq else Nil
         if st.isDirectory) {
      val opDst = new Path(dst, s"state/${st.getPath.getName}")
      copySparkMetadata(srcFs, st.getPath, opDst, hadoopConf)
      srcFs.listStatus(st.getPath).filter(p => p.isDirectory && !p.getPath.getName.startsWith("_")).foreach { part =>
        val partDst = new Path(opDst, part.getPath.getName)
        copySparkMetadata(srcFs, part.getPath, partDst, hadoopConf)
        srcFs.listStatus(part.getPath).filter(p => p.isDirectory && !p.getPath.getName.startsWith("_") &&
            stores.exists(_.storeName == p.getPath.getName)).foreach { store =>
          copySparkMetadata(srcFs, store.getPath, new Path(partDst, store.getPath.getName), hadoopConf)
        }
      }
    }
    if (srcFs.exists(new Path(src, "sources"))) {
      FileUtil.copy(srcFs, new Path(src, "sources"), dstFs, new Path(dst, "sources"), false, hadoopConf)
    }
    dstFs.mkdirs(new Path(dst, "offsets"))
    offsets.foreach { b =>
      writeText(dstFs, new Path(dst, s"offsets/$b"), rewriteOffsets(readText(srcFs, new Path(src, s"offsets/$b")),
        targetProvider))
    }
  }

  /** One Spark task per store copies it; fails unless every store's counts agree. */
  private def copyStores(spark: LineStores.Session, stores: Seq[StoreSpec], what: String, srcState: String,
      dstState: String, version: Long, srcConf: StateStoreConf, dstConf: StateStoreConf, verifyConf: StateStoreConf,
      conf: SerializableConfiguration): Seq[Copied] = {
    val copied = if (stores.isEmpty) Seq.empty[Copied] else {
      val sc = spark.sparkContext
      sc.setJobDescription(s"ttlstate migrate: $what")
      try {
        // The counts come back as plain arrays: the driver may have loaded this tool from its
        // own class loader (ttlstate migrate inside a running session), which the threads that
        // deserialize task results do not see.
        val counts = sc.parallelize(stores, stores.size).map { spec =>
          copyStore(spec, srcState, dstState, version, srcConf, dstConf, verifyConf, conf.value)
        }.collect().toSeq
        stores.zip(counts).map { case (spec, c) => Copied(spec, c(0), c(1), c(2)) }
      } finally sc.setJobDescription(null)
    }
    val wrong = copied.filter(c => c.read != c.committed || c.read != c.readBack)
    if (wrong.nonEmpty) {
      fail("row counts differ after the copy (the target is incomplete; delete it): " + wrong.map(c =>
        s"${c.spec.label}: read ${c.read}, committed ${c.committed}, read back ${c.readBack}").mkString("; "))
    }
    copied
  }

  private def report(source: String, target: String, last: Long, version: Long, sourceProvider: String,
      targetProvider: String, copied: Seq[Copied]): String = {
    val storesJson = copied.map { c =>
      s"""{"operator":${c.spec.operatorId},"partition":${c.spec.partitionId},"store":${Json.str(c.spec.storeName)},""" +
        s""""rows":${c.read}}"""
    }.mkString("[", ",", "]")
    s"""{"source":${Json.str(source)},"target":${Json.str(target)},"batch":$last,"version":$version,""" +
      s""""sourceProvider":${Json.str(sourceProvider)},"targetProvider":${Json.str(targetProvider)},""" +
      s""""stores":$storesJson}"""
  }

  private def copyStore(spec: StoreSpec, srcState: String, dstState: String, version: Long, srcConf: StateStoreConf,
      dstConf: StateStoreConf, verifyConf: StateStoreConf, hadoopConf: Configuration): Array[Long] = {
    val keySchema = DataType.fromJson(spec.keySchemaJson).asInstanceOf[StructType]
    val valueSchema = DataType.fromJson(spec.valueSchemaJson).asInstanceOf[StructType]
    def provider(root: String, conf: StateStoreConf): StateStoreProvider =
      LineStores.provider(StateStoreId(root, spec.operatorId, spec.partitionId, spec.storeName), keySchema,
        valueSchema, spec.numColsPrefixKey, conf, hadoopConf)
    def where(e: Throwable) = new MigrationError(s"${spec.label}: ${e.getMessage}")

    val source = provider(srcState, srcConf)
    val (read, committed) = try {
      val target = provider(dstState, dstConf)
      try {
        val in = LineStores.readStore(source, version)
        val out = LineStores.emptyWriteStore(target, version - 1)
        var n = 0L
        try {
          val it = in.iterator()
          while (it.hasNext) {
            val pair = it.next()
            out.put(pair.key.copy(), pair.value.copy())
            n += 1
          }
          val newVersion = out.commit()
          if (newVersion != version) throw new IllegalStateException(s"the target committed version $newVersion, not $version")
          (n, out.metrics.numKeys)
        } catch {
          case e: Throwable =>
            if (!out.hasCommitted) out.abort()
            throw e
        } finally in.abort()
      } finally target.close()
    } catch {
      case e: MigrationError => throw e
      case e: Throwable => throw where(e)
    } finally source.close()
    val check = provider(dstState, verifyConf)
    val readBack = try {
      val s = LineStores.readStore(check, version)
      try { var n = 0L; val it = s.iterator(); while (it.hasNext) { it.next(); n += 1 }; n } finally s.abort()
    } catch {
      case e: Throwable => throw where(e)
    } finally check.close()
    Array(read, committed, readBack)
  }
}
