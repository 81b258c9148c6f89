package ttlstate.spark

import java.io.File
import java.lang.management.ManagementFactory
import java.net.InetAddress
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, FileLock, OverlappingFileLockException}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.StandardOpenOption.{CREATE, READ, WRITE}
import java.time.Instant
import java.util.concurrent.ConcurrentHashMap

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataOutputStream, Path}
import org.apache.hadoop.hdfs.DistributedFileSystem
import org.slf4j.LoggerFactory

/** The lock a running query holds on its checkpoint (`<checkpoint>/_ttlstate_lock`), so that a
 *  tool that rewrites a stopped query's checkpoint (`ttlstate repartition`) refuses a running
 *  one, and a query does not start on a checkpoint such a tool is rewriting.
 *
 *  Spark itself has no such lock (a second driver on a running query's checkpoint is stopped by
 *  its offset log, after it began). Held by the driver from `start()` (ttlstate's start checks)
 *  until the query terminates; the runs of queries in one JVM share it. On a local disk it is an
 *  OS file lock (`fcntl`), freed when the process ends however it ends; on HDFS the lease of the
 *  open lock file, which the NameNode keeps for about a minute after its holder died; other file
 *  systems have neither, and are not locked. The file holds a line naming the holder, whose first
 *  word says whether it is a query or a tool: a query never fails to start because another
 *  query's driver holds the lock (a restarted driver after its predecessor crashed; two live
 *  drivers are Spark's to stop), only because a tool does. */
object CheckpointLock {
  val FileName = "_ttlstate_lock"
  private val Query = "query"
  private val Tool = "tool"
  private val log = LoggerFactory.getLogger("ttlstate.spark.CheckpointLock")

  /** One held lock of this JVM: `queries` runs of queries share it; a tool holds it alone. */
  private final class Held(val owner: String, val free: () => Unit, var queries: Int)
  private val held = new ConcurrentHashMap[String, Held]()

  final class Locked(message: String) extends IllegalStateException(message)

  def describe(what: String): String =
    s"$what (pid ${ManagementFactory.getRuntimeMXBean.getName.takeWhile(_ != '@')} on " +
      s"${Try(InetAddress.getLocalHost.getHostName).getOrElse("?")}, since ${Instant.now()})"

  /** A query run's share of the lock (taking it if this JVM does not hold it yet); throws Locked
   *  naming the holder when a tool, here or in another process, holds it. */
  def forQuery(checkpoint: String, owner: String, hadoopConf: Configuration): Unit = held.synchronized {
    val path = lockPath(checkpoint, hadoopConf)
    Option(held.get(path.toString)) match {
      case Some(h) if h.queries > 0 => h.queries += 1
      case Some(h) => throw locked(checkpoint, h.owner)
      case None => take(path, s"$Query $owner", hadoopConf, queries = 1).foreach { holder =>
        if (!holder.startsWith(Query + " ") && !gone(holder)) throw locked(checkpoint, withoutKind(holder))
        if (!retaken(path, s"$Query $owner", hadoopConf, queries = 1)) {
          log.warn(s"ttlstate: the checkpoint $checkpoint is locked by ${withoutKind(holder)}, which " +
            "is gone or runs the same query (Spark stops one of two drivers of a query): this run goes on " +
            "without the lock")
        }
      }
    }
  }

  /** A query run of `checkpoint` ended: the last one frees the lock. */
  def queryEnded(checkpoint: String, hadoopConf: Configuration): Unit = held.synchronized {
    val key = lockPath(checkpoint, hadoopConf).toString
    Option(held.get(key)).filter(_.queries > 0).foreach { h =>
      h.queries -= 1
      if (h.queries == 0) { held.remove(key); h.free() }
    }
  }

  /** A tool's lock, alone: null when taken, else who holds it. `staleRuns`: this JVM's query runs
   *  holding it have all ended (their termination was not seen), so it may be taken from them. */
  def forTool(checkpoint: String, owner: String, hadoopConf: Configuration, staleRuns: Boolean): String =
    held.synchronized {
      val path = lockPath(checkpoint, hadoopConf)
      Option(held.get(path.toString)) match {
        case Some(h) if !(staleRuns && h.queries > 0) => h.owner
        case existing =>
          existing.foreach { h => held.remove(path.toString); h.free() }
          take(path, s"$Tool $owner", hadoopConf, queries = 0).filterNot { holder =>
            gone(holder) && retaken(path, s"$Tool $owner", hadoopConf, queries = 0)
          }.map(withoutKind).orNull
      }
    }

  /** The tool is done with `checkpoint`. */
  def toolDone(checkpoint: String, hadoopConf: Configuration): Unit = held.synchronized {
    val key = lockPath(checkpoint, hadoopConf).toString
    Option(held.get(key)).filter(_.queries == 0).foreach { h => held.remove(key); h.free() }
  }

  private def lockPath(checkpoint: String, hadoopConf: Configuration): Path = {
    val root = new Path(checkpoint)
    new Path(root.getFileSystem(hadoopConf).makeQualified(root), FileName)
  }

  private def withoutKind(line: String): String = line.stripPrefix(Query + " ").stripPrefix(Tool + " ")

  /** Whether the holder `line` names a process of this host that no longer runs (the lease of a
   *  holder killed on HDFS outlives it by about a minute). */
  private def gone(line: String): Boolean = HolderLine.findFirstMatchIn(line).exists { m =>
    Try(InetAddress.getLocalHost.getHostName).toOption.contains(m.group(2)) &&
      !ProcessHandle.of(m.group(1).toLong).isPresent
  }
  private val HolderLine = """\(pid (\d+) on ([^,]+),""".r

  /** HDFS: the lock file's lease taken from a holder that is gone (or a query's driver: queries
   *  share the lock), then the lock taken, waiting up to 10 s for the NameNode's recovery; false
   *  when it could not be taken (and elsewhere, where a lock is not held after its holder). */
  private def retaken(path: Path, line: String, hadoopConf: Configuration, queries: Int): Boolean =
    path.getFileSystem(hadoopConf) match {
      case dfs: DistributedFileSystem =>
        val deadline = System.nanoTime() + 10000000000L
        var taken = false
        while (!taken && System.nanoTime() < deadline) {
          taken = Try(dfs.recoverLease(path)).getOrElse(false) && take(path, line, hadoopConf, queries).isEmpty
          if (!taken) Thread.sleep(500)
        }
        taken
      case _ => false
    }

  private def locked(checkpoint: String, holder: String): Locked = new Locked(
    s"[TTLSTATE_CHECKPOINT_LOCKED] The checkpoint $checkpoint is in use by $holder. A query and " +
    "`ttlstate repartition` never use one checkpoint at the same time: wait until it ends (on HDFS, the lock " +
    "of a process killed on another host frees itself within about a minute).")

  /** Takes the lock at `path` for this JVM; None, or the holder's line when another process holds it. */
  private def take(path: Path, owner: String, hadoopConf: Configuration, queries: Int): Option[String] = {
    val fs = path.getFileSystem(hadoopConf)
    val line = (owner + "\n").getBytes(UTF_8)
    val free: Option[() => Unit] = fs.getScheme match {
      case "file" => onLocalDisk(new File(path.toUri.getPath), line)
      case "hdfs" => Try(fs.create(path, true)).toOption.map { out => leased(out, line) }
      case other =>
        log.warn(s"ttlstate: checkpoints on '$other' file systems cannot be locked: a running query on " +
          s"${path.getParent} is not detected by tools that rewrite a stopped query's checkpoint")
        Some(() => ())
    }
    free match {
      case Some(f) => held.put(path.toString, new Held(withoutKind(owner), f, queries)); None
      case None => Some(holderOf(path, hadoopConf))
    }
  }

  private def onLocalDisk(file: File, line: Array[Byte]): Option[() => Unit] = {
    file.getParentFile.mkdirs()
    val channel = FileChannel.open(file.toPath, CREATE, READ, WRITE)
    val lock: FileLock = try channel.tryLock() catch { case _: OverlappingFileLockException => null }
    if (lock == null) { channel.close(); None }
    else {
      channel.truncate(0)
      channel.write(ByteBuffer.wrap(line), 0)
      channel.force(false)
      Some(() => { Try(lock.release()); Try(channel.close()) })
    }
  }

  private def leased(out: FSDataOutputStream, line: Array[Byte]): () => Unit = {
    out.write(line)
    out.hflush()
    () => Try(out.close())
  }

  private def holderOf(path: Path, hadoopConf: Configuration): String = Try {
    val in = path.getFileSystem(hadoopConf).open(path)
    try new String(in.readAllBytes(), UTF_8).trim finally in.close()
  }.toOption.filter(_.nonEmpty).getOrElse("another process")
}
