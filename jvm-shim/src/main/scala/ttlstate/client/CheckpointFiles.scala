package ttlstate.client

import java.io.{File, FileNotFoundException, IOException}
import java.nio.file.{Files, StandardCopyOption}

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.hadoop.fs.local.LocalFs
import ttlstate.spark.SparkLine

/** Moves one store's files between the state server's local staging dir and the checkpoint
 *  location, through Spark's CheckpointFileManager (so HDFS, S3A, ABFS and GCS work as for
 *  Spark's own providers). Publishing is atomic: temp file + rename, overwriting. */
final class CheckpointFiles(dir: Path, hadoopConf: Configuration) {
  private lazy val fm: SparkLine.FileManager = SparkLine.fileManager(dir, hadoopConf)

  /** The folder's path when it is on the local file system as Hadoop ships it and Spark's
   *  default file manager would serve it: the state server may then read and write it itself
   *  (a file through Hadoop's local file system costs tens of milliseconds). None for any other
   *  scheme, a local file system replaced in the conf (`fs.file.impl`,
   *  `fs.AbstractFileSystem.file.impl`) or a custom `checkpointFileManagerClass`. */
  lazy val localDirectory: Option[String] = {
    def set(key: String) = Option(hadoopConf.get(key)).filter(_.nonEmpty)
    val replaced = set(CheckpointFiles.ManagerClassKey).isDefined || set("fs.file.impl").isDefined ||
      set("fs.AbstractFileSystem.file.impl").exists(_ != classOf[LocalFs].getName)
    if (replaced) None
    else Try(dir.getFileSystem(hadoopConf).makeQualified(dir).toUri).toOption
      .filter(_.getScheme == "file").map(_.getPath)
  }

  def list(): Seq[String] = {
    if (!fm.exists(dir)) Seq.empty
    else fm.list(dir).toSeq.filter(_.isFile).map(_.getPath.getName)
  }

  def fetch(name: String, localPath: String): Unit = {
    val path = new Path(dir, name)
    val in = try fm.open(path) catch {
      case _: FileNotFoundException => throw new FileNotFoundException(s"checkpoint file $path does not exist")
    }
    try Files.copy(in, new File(localPath).toPath, StandardCopyOption.REPLACE_EXISTING)
    finally in.close()
  }

  def publish(localPath: String, name: String): Unit = {
    fm.mkdirs(dir)
    val out = fm.createAtomic(new Path(dir, name), true)
    try {
      Files.copy(new File(localPath).toPath, out)
      out.close()
    } catch {
      case e: Throwable =>
        out.cancel()
        throw new IOException(s"failed to write checkpoint file ${new Path(dir, name)}: ${e.getMessage}", e)
    }
  }

  def delete(names: Seq[String]): Unit = names.foreach(n => fm.delete(new Path(dir, n)))

  /** Serves one callback from the server; returns the result frame. An I/O error names the
   *  operation and the checkpoint path (an unreachable HDFS otherwise says only host:port). */
  def serve(kind: Int, r: PayloadReader): Array[Byte] = {
    val w = new PayloadWriter()
    var what = s"checkpoint directory $dir"
    try {
      kind match {
        case Protocol.CB_LIST =>
          what = s"listing $dir"
          val names = list()
          w.u32(names.size)
          names.foreach(w.str)
        case Protocol.CB_FETCH =>
          val name = r.str()
          what = s"reading ${new Path(dir, name)}"
          fetch(name, r.str())
        case Protocol.CB_PUBLISH =>
          val local = r.str()
          val name = r.str()
          what = s"writing ${new Path(dir, name)}"
          publish(local, name)
        case Protocol.CB_DELETE =>
          what = s"deleting from $dir"
          delete((0 until r.u32()).map(_ => r.str()))
        case other => throw new IOException(s"unknown callback $other")
      }
      w.frame(Protocol.CB_RESULT_OK)
    } catch {
      case e: FileNotFoundException =>
        w.reset().u8(Protocol.CB_ERR_NOT_FOUND).str(e.getMessage).frame(Protocol.CB_RESULT_ERROR)
      case e: Exception =>
        w.reset().u8(Protocol.CB_ERR_IO).str(s"$what: ${e.getClass.getSimpleName}: ${e.getMessage}")
          .frame(Protocol.CB_RESULT_ERROR)
    }
  }
}

object CheckpointFiles {
  /** Spark's conf naming a custom CheckpointFileManager (read from the Hadoop conf, as Spark does). */
  val ManagerClassKey = "spark.sql.streaming.checkpointFileManagerClass"
}
