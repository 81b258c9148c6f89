package ttlstate.spark

import java.io.{File, IOException}
import java.net.InetAddress
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, FileLock, OverlappingFileLockException}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files
import java.nio.file.StandardOpenOption.{CREATE, WRITE}
import java.time.Instant
import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.util.Try
import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataOutputStream, FileSystem, LocalFileSystem, Path, RawLocalFileSystem}
import org.apache.hadoop.hdfs.DistributedFileSystem
import org.apache.hadoop.ipc.RemoteException
import org.slf4j.LoggerFactory

/** The lock a running query holds on its checkpoint (`<checkpoint>/_ttlstate_lock`), so that a
 *  tool that rewrites a stopped query's checkpoint (`ttlstate repartition`) refuses a running
 *  one, and a query does not start on a checkpoint such a tool is rewriting.
 *
 *  Spark itself has no such lock (a second driver on a running query's checkpoint is stopped by
 *  its offset log, after it began). It runs at every query start, so a query never waits for it
 *  and never fails because of it, except while a live tool holds it: whatever else goes wrong
 *  (a file system without locks, such as an object store; a read-only or full disk; another
 *  query's driver, live or dead, holding it) leaves the query running without the lock.
 *
 *  Held by the driver from `start()` (ttlstate's start checks) until the query terminates; the
 *  runs of queries in one JVM share it (QueryLocks tells which runs). On a local disk it is an OS
 *  file lock (`fcntl`), freed when the process ends however it ends; on HDFS the lease of the open
 *  (empty) lock file, which the NameNode keeps for about a minute after its holder died, the holder
 *  named in an extended attribute; other file systems are not locked. The holder's line starts
 *  with what it is, `query` or `tool`. The file stays (one per checkpoint, reused by every run).
 *  A tool, unlike a query, never goes on without the lock where the file system has locks. */
object CheckpointLock {
  val FileName = "_ttlstate_lock"
  private val Query = "query"
  private val Tool = "tool"
  private val HolderXAttr = "user.ttlstate.holder"
  private val log = LoggerFactory.getLogger("ttlstate.spark.CheckpointLock")

  /** One lock this JVM holds: a tool's alone, or the query runs' of this JVM (`runs` started,
   *  `starting`: the threads of starts checked and not yet seen started). */
  private final class Held(val owner: String, val free: () => Unit, val tool: Boolean) {
    var runs: Set[UUID] = Set.empty
    var starting: List[Thread] = Nil
  }
  private val held = new ConcurrentHashMap[String, Held]()
  private val saidUnlockable = ConcurrentHashMap.newKeySet[String]()
  private val startedWithout = ConcurrentHashMap.newKeySet[String]() // checked starts another holder kept out

  final class Locked(message: String) extends IllegalStateException(message)

  private lazy val host: String = Try(InetAddress.getLocalHost.getHostName).getOrElse("?")

  def describe(what: String): String = s"$what (pid ${ProcessHandle.current().pid()} on $host, since ${Instant.now()})"

  /** At a query's start, on the thread that starts it: its share of the lock (taking it when this
   *  JVM does not hold it). Throws Locked naming the holder when a tool holds it; nothing else. */
  def queryStarting(checkpoint: String, owner: String, hadoopConf: Configuration): Unit = held.synchronized {
    lockPath(checkpoint, hadoopConf) match {
      case Left(reason) => unlockable(checkpoint, reason)
      case Right(path) => Option(held.get(path.toString)) match {
        case Some(h) if h.tool => throw locked(checkpoint, h.owner)
        case Some(h) => h.starting ::= Thread.currentThread()
        case None => take(path, s"$Query $owner", hadoopConf) match {
          case Taken(free) =>
            val h = new Held(owner, free, tool = false)
            h.starting = List(Thread.currentThread())
            held.put(path.toString, h)
          case HeldBy(holder) if holder.startsWith(Tool + " ") && !gone(holder) =>
            throw locked(checkpoint, withoutKind(holder))
          case HeldBy(holder) =>
            if (gone(holder)) startRecovery(path, hadoopConf)
            startedWithout.add(path.toString)
            log.warn(s"ttlstate: the checkpoint $checkpoint is locked by ${withoutKind(holder)}, which is gone or " +
              "runs the same query (Spark stops one of two drivers of a query): this run starts without the lock " +
              "and takes it after a batch once it is free")
          case Unlockable(reason) => unlockable(checkpoint, reason)
        }
      }
    }
  }

  /** The query run `runId` of `checkpoint` started (QueryStartedEvent): every start checked on it
   *  is settled (one run of a query at a time; another start of it failed or stops this one).
   *  False when it started without the lock, which it should take after a batch (`retake`). */
  def runStarted(checkpoint: String, runId: UUID, hadoopConf: Configuration): Boolean = held.synchronized {
    lockPath(checkpoint, hadoopConf).toOption.forall { path =>
      Option(held.get(path.toString)).filterNot(_.tool).foreach { h => h.runs += runId; h.starting = Nil }
      !startedWithout.remove(path.toString) || held.containsKey(path.toString)
    }
  }

  /** After a batch of a run that started without the lock (another driver's, or a dead one's
   *  lease on HDFS, held it): the lock, if it is free now (one attempt, never waiting). Whether
   *  this JVM holds it for the run now. */
  def retake(checkpoint: String, runId: UUID, owner: String, hadoopConf: Configuration): Boolean =
    held.synchronized {
      lockPath(checkpoint, hadoopConf).toOption.exists { path =>
        Option(held.get(path.toString)) match {
          case Some(h) => if (!h.tool) h.runs += runId; !h.tool
          case None => take(path, s"$Query $owner", hadoopConf) match {
            case Taken(free) =>
              val h = new Held(owner, free, tool = false)
              h.runs = Set(runId)
              held.put(path.toString, h)
              log.info(s"ttlstate: the query of $checkpoint holds its checkpoint's lock now")
              true
            case HeldBy(holder) if holder.startsWith(Tool + " ") && !gone(holder) =>
              log.warn(s"ttlstate: ${withoutKind(holder)} holds the lock of $checkpoint, whose query runs (it " +
                "started while another driver held the lock): stop one of them")
              false
            case HeldBy(holder) => if (gone(holder)) startRecovery(path, hadoopConf); false
            case Unlockable(_) => true
          }
        }
      }
    }

  /** The query run `runId` of `checkpoint` terminated: the last run frees the lock. */
  def runEnded(checkpoint: String, runId: UUID, hadoopConf: Configuration): Unit = held.synchronized {
    entry(checkpoint, hadoopConf).filterNot(_._2.tool).foreach { case (key, h) =>
      h.runs -= runId
      settle(key, h)
    }
  }

  /** Lets every lock of this JVM go that no run and no start uses any more: runs that ended
   *  without their termination being seen (the listener bus drops events when it is full), starts
   *  that failed after the checks (a query name in use, say). */
  def settleAll(): Unit = held.synchronized {
    held.entrySet().toArray(Array.empty[java.util.Map.Entry[String, Held]]).foreach { e =>
      if (!e.getValue.tool) settle(e.getKey, e.getValue)
    }
  }

  private def settle(key: String, h: Held): Unit = {
    h.runs = h.runs.filter(QueryLocks.active)
    h.starting = h.starting.filter(starting)
    if (h.runs.isEmpty && h.starting.isEmpty) { held.remove(key); h.free() }
  }

  /** Whether `thread` is still inside a query's start (StreamingQueryManager.startQuery). */
  private def starting(thread: Thread): Boolean = thread.isAlive &&
    thread.getStackTrace.exists(f => f.getMethodName == "startQuery" && f.getClassName.endsWith("StreamingQueryManager"))

  /** A tool's lock, alone: null when the tool holds it now; else why not, in words that follow the
   *  checkpoint's name (`is in use by ...`, `could not be locked ...`, `cannot be locked ...`). A
   *  tool never goes on without it: a query running there would go unnoticed (a file system
   *  without locks is the caller's to allow, `unlockableReason`). It may wait (up to 10 s on HDFS,
   *  for the lease of a holder that is gone). */
  def forTool(checkpoint: String, owner: String, hadoopConf: Configuration): String = held.synchronized {
    settleAll()
    lockPath(checkpoint, hadoopConf) match {
      case Left(reason) => s"cannot be locked ($reason)"
      case Right(path) => Option(held.get(path.toString)) match {
        case Some(h) => inUse(if (h.tool) s"$Tool ${h.owner}" else s"$Query ${h.owner}")
        case None => take(path, s"$Tool $owner", hadoopConf) match {
          case Taken(free) => held.put(path.toString, new Held(owner, free, tool = true)); null
          case HeldBy(holder) if gone(holder) => retaken(path, s"$Tool $owner", hadoopConf) match {
            case Some(free) =>
              log.warn(s"ttlstate: the lock of $checkpoint was held by ${withoutKind(holder)}, which is gone: taken over")
              held.put(path.toString, new Held(owner, free, tool = true)); null
            case None => inUse(holder)
          }
          case HeldBy(holder) => inUse(holder)
          case Unlockable(reason) =>
            s"could not be locked (taking its lock file $path failed: $reason), so a query running there " +
              "would go unnoticed: nothing was changed; fix that, then run the command again"
        }
      }
    }
  }

  /** Why a tool is refused, from the holder's line (its first word says what holds the lock). */
  private def inUse(line: String): String =
    if (line.startsWith(Tool + " ")) s"is in use by ${withoutKind(line)}: wait until it ends"
    else s"is in use by ${withoutKind(line)}: stop that query first"

  /** Why `checkpoint`'s file system has no lock (an object store, say: a query running there goes
   *  unnoticed), or null where it has one (local disks, HDFS). */
  def unlockableReason(checkpoint: String, hadoopConf: Configuration): String =
    lockPath(checkpoint, hadoopConf).left.toOption.orNull

  /** The tool is done with `checkpoint`. */
  def toolDone(checkpoint: String, hadoopConf: Configuration): Unit = held.synchronized {
    entry(checkpoint, hadoopConf).filter(_._2.tool).foreach { case (key, h) => held.remove(key); h.free() }
  }

  private def entry(checkpoint: String, hadoopConf: Configuration): Option[(String, Held)] =
    lockPath(checkpoint, hadoopConf).toOption.flatMap(p => Option(held.get(p.toString)).map(p.toString -> _))

  /** The lock file of `checkpoint` (a path or URI, as Spark resolves it), or why its file system has
   *  none: only local disks and HDFS have locks; other schemes are not even opened for it. One of
   *  those two that cannot be opened gives the path as it is: taking the lock then fails, naming why. */
  private def lockPath(checkpoint: String, hadoopConf: Configuration): Either[String, Path] =
    Try(new Path(checkpoint)).toEither.left.map(e => s"not a path ($e)").flatMap { root =>
      val scheme = Option(root.toUri.getScheme).orElse(Try(FileSystem.getDefaultUri(hadoopConf).getScheme).toOption)
      if (!scheme.exists(s => s == "file" || s == "hdfs")) Left(s"checkpoints on '${scheme.orNull}' file systems have no lock")
      else (try Some(root.getFileSystem(hadoopConf)) catch { case _: Exception | _: LinkageError => None }) match {
        case Some(fs) if hasLocks(fs) => Right(new Path(fs.makeQualified(root), FileName))
        case Some(fs) => Left(s"${fs.getClass.getName} has no lock")
        case None => Right(new Path(root, FileName))
      }
    }

  private def hasLocks(fs: FileSystem): Boolean = fs match {
    case _: LocalFileSystem | _: RawLocalFileSystem => true
    case other => try other.isInstanceOf[DistributedFileSystem] catch { case _: LinkageError => false }
  }

  private def unlockable(checkpoint: String, reason: String): Unit =
    if (saidUnlockable.add(checkpoint)) {
      log.info(s"ttlstate: the checkpoint $checkpoint is not locked ($reason): `ttlstate repartition` cannot " +
        "tell whether its query runs")
    }

  private def withoutKind(line: String): String = line.stripPrefix(Query + " ").stripPrefix(Tool + " ")

  /** Whether the holder `line` names a process of this host that no longer runs (the lease of a
   *  holder killed on HDFS outlives it by about a minute). */
  private def gone(line: String): Boolean = HolderLine.findFirstMatchIn(line).exists { m =>
    m.group(2) == host && !ProcessHandle.of(m.group(1).toLong).isPresent
  }
  private val HolderLine = """\(pid (\d+) on ([^,]+),""".r

  private sealed trait Outcome
  private final case class Taken(free: () => Unit) extends Outcome
  private final case class HeldBy(line: String) extends Outcome
  private final case class Unlockable(reason: String) extends Outcome

  /** Takes the lock at `path`: Taken, HeldBy another process's holder line, or Unlockable (what
   *  went wrong); never throws. */
  private def take(path: Path, line: String, hadoopConf: Configuration): Outcome = try {
    path.getFileSystem(hadoopConf) match {
      case _: LocalFileSystem | _: RawLocalFileSystem => onLocalDisk(new File(path.toUri.getPath), line)
      case dfs: DistributedFileSystem => onHdfs(dfs, path, line)
      case other => Unlockable(s"${other.getClass.getName} has no lock")
    }
  } catch {
    case e: Exception => Unlockable(e.toString)
    case e: LinkageError => Unlockable(e.toString) // a Hadoop without HDFS's client classes
  }

  private def onLocalDisk(file: File, line: String): Outcome = {
    file.getParentFile.mkdirs()
    val channel = FileChannel.open(file.toPath, CREATE, WRITE)
    try {
      val lock: FileLock = try channel.tryLock() catch { case _: OverlappingFileLockException => null }
      if (lock == null) {
        channel.close()
        HeldBy(holderLine(() => Try(new String(Files.readAllBytes(file.toPath), UTF_8).trim).toOption))
      } else {
        val bytes = (line + "\n").getBytes(UTF_8)
        channel.write(ByteBuffer.wrap(bytes), 0) // then cut: the file is never empty
        channel.truncate(bytes.length)
        Taken(() => { Try(lock.release()); Try(channel.close()) })
      }
    } catch { case NonFatal(e) => Try(channel.close()); Unlockable(e.toString) }
  }

  /** The lease of the lock file, opened for writing with no byte written (no block, so no pipeline
   *  to DataNodes is kept open while a query runs), its holder in an extended attribute while held.
   *  Never overwritten: a create that overwrites deletes the file even while another client holds
   *  its lease, and so would take every holder's lock. The file is created once, then opened for
   *  append, which the NameNode refuses while another live client holds the lease
   *  (AlreadyBeingCreatedException) or while it recovers a dead one's (RecoveryInProgressException);
   *  an append to the empty, closed file writes nothing. */
  private def onHdfs(dfs: DistributedFileSystem, path: Path, line: String): Outcome =
    try {
      val out = openForWriting(dfs, path, tries = 2)
      Try(dfs.setXAttr(path, HolderXAttr, line.getBytes(UTF_8)))
      Taken { () =>
        if (holderOf(dfs, path).contains(line)) Try(dfs.removeXAttr(path, HolderXAttr)) // a free lock names no holder
        Try(out.close())
      }
    } catch {
      case e: IOException if leaseHeld(e) => HeldBy(holderLine(() => holderOf(dfs, path)))
    }

  /** The lock file open for writing: appended to (every run but the first, one NameNode call),
   *  created when missing. A race with another taker creating it first is tried once more. */
  private def openForWriting(dfs: DistributedFileSystem, path: Path, tries: Int): FSDataOutputStream =
    try dfs.append(path)
    catch {
      case e: IOException if named(e, "FileNotFoundException") =>
        try dfs.create(path, false)
        catch { case e: IOException if tries > 1 && named(e, "FileAlreadyExistsException") => openForWriting(dfs, path, tries - 1) }
    }

  private def holderOf(dfs: DistributedFileSystem, path: Path): Option[String] =
    Try(new String(dfs.getXAttr(path, HolderXAttr), UTF_8)).toOption

  /** The holder's line, read again a few times (for up to 0.1 s) while it is not there yet or names
   *  a process that is gone: a holder that has just taken the lock writes it right after, and on
   *  HDFS the line of an earlier holder killed while holding it stays until then. */
  private def holderLine(read: () => Option[String]): String = {
    var line: Option[String] = None
    var reads = 0
    while (reads < 6 && !line.exists(l => !gone(l))) {
      if (reads > 0) Thread.sleep(20)
      line = read().map(_.trim).filter(_.nonEmpty).orElse(line)
      reads += 1
    }
    line.getOrElse("another process")
  }

  /** The NameNode's answer to a create or append of a file another client has open (or whose dead
   *  holder's lease it is recovering): as a RemoteException naming it, as the client passes it on,
   *  or unwrapped. */
  private[spark] def leaseHeld(e: Throwable): Boolean =
    named(e, "AlreadyBeingCreatedException") || named(e, "RecoveryInProgressException")

  /** Whether `e`, or an exception it wraps (a RemoteException carries the NameNode's by name),
   *  is of the class `simpleName`. */
  private def named(e: Throwable, simpleName: String): Boolean =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(8).exists { t =>
      val name = t match { case r: RemoteException => r.getClassName; case other => other.getClass.getName }
      name == simpleName || name.endsWith("." + simpleName)
    }

  /** HDFS: the NameNode asked to recover the lease of a holder that is gone (one call, not waited
   *  for: the file is closed within seconds). */
  private def startRecovery(path: Path, hadoopConf: Configuration): Unit =
    Try(path.getFileSystem(hadoopConf)).toOption.collect { case dfs: DistributedFileSystem => Try(dfs.recoverLease(path)) }

  /** HDFS: the lock file's lease taken from a holder that is gone, waiting up to 10 s for the
   *  NameNode's recovery; None when it could not be taken (and elsewhere, where a lock is not
   *  held after its holder). For tools only: a query never waits. */
  private def retaken(path: Path, line: String, hadoopConf: Configuration): Option[() => Unit] =
    Try(path.getFileSystem(hadoopConf)).toOption.collect { case dfs: DistributedFileSystem => dfs }.flatMap { dfs =>
      val deadline = System.nanoTime() + 10000000000L
      var taken: Option[() => Unit] = None
      // Recovery takes a live holder's lease too: asked for only while the holder is the gone one
      // (after a failed take, once the winner had time to name itself).
      while (taken.isEmpty && holderOf(dfs, path).exists(gone) && System.nanoTime() < deadline) {
        if (Try(dfs.recoverLease(path)).getOrElse(false)) {
          taken = take(path, line, hadoopConf) match { case Taken(free) => Some(free); case _ => None }
        }
        if (taken.isEmpty) Thread.sleep(500)
      }
      taken
    }

  private def locked(checkpoint: String, holder: String): Locked = new Locked(
    s"[TTLSTATE_CHECKPOINT_LOCKED] The checkpoint $checkpoint is in use by $holder. A query and " +
    "`ttlstate repartition` never use one checkpoint at the same time: wait until it ends (on HDFS, the lock " +
    "of a process killed on another host frees itself within about a minute).")
}
