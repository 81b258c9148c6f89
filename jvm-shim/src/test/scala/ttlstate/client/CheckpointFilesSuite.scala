package ttlstate.client

import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.scalatest.funsuite.AnyFunSuite

/** Which checkpoint folders the state server may read and write itself: `file:` ones, on the
 *  local file system as Hadoop ships it, as Spark's default file manager would serve them. */
class CheckpointFilesSuite extends AnyFunSuite {
  private val folder = Files.createTempDirectory("ttlstate-ck").toString

  test("a folder on Hadoop's local file system is given as its local path") {
    for (dir <- Seq(folder, s"file:$folder", s"file://$folder")) {
      assert(new CheckpointFiles(new Path(dir), new Configuration()).localDirectory.contains(folder), dir)
    }
  }

  test("a custom checkpoint file manager keeps every folder behind Hadoop") {
    val conf = new Configuration()
    conf.set(CheckpointFiles.ManagerClassKey, "com.example.MyFileManager")
    assert(new CheckpointFiles(new Path(s"file:$folder"), conf).localDirectory.isEmpty)
  }

  test("a local file system replaced in the conf, or another file system, keeps the folder behind Hadoop") {
    for (key <- Seq("fs.file.impl", "fs.AbstractFileSystem.file.impl")) {
      val conf = new Configuration()
      conf.set(key, "com.example.WatchedLocalFileSystem")
      assert(new CheckpointFiles(new Path(s"file:$folder"), conf).localDirectory.isEmpty, key)
    }
    assert(new CheckpointFiles(new Path("nosuchscheme://host/ck"), new Configuration()).localDirectory.isEmpty)
    val defaultHdfs = new Configuration()
    defaultHdfs.set("fs.defaultFS", "hdfs://localhost:1")
    assert(new CheckpointFiles(new Path(folder), defaultHdfs).localDirectory.isEmpty)
  }
}
