package ttlstate.server

import java.io.{BufferedInputStream, BufferedOutputStream, BufferedReader, DataInputStream, File, IOException, InputStreamReader, InterruptedIOException, OutputStream}
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.{CompletableFuture, ConcurrentHashMap, ConcurrentLinkedQueue, TimeUnit, TimeoutException}
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._
import scala.annotation.tailrec
import scala.util.{Failure, Random, Success, Try}

import org.apache.hadoop.fs.FileUtil
import org.apache.spark.{SparkConf, SparkContext, SparkEnv}
import org.apache.spark.scheduler.{SparkListener, SparkListenerApplicationEnd}
import org.apache.spark.ttlstate.{SparkActiveContext, SparkLocalDirs}
import ttlstate.client.{ServerConnection, ServerStopped}
import ttlstate.conf.{ConfKeys, ConfValues}

/** A started server process, its workers, and a pool of connections per worker socket.
 *  `workers(i)` is the process serving `sockets(i)` (None if it could not be identified: the
 *  watchdog then watches the whole server). */
final class RunningServer(val generation: Long, process: Process, stdin: OutputStream,
    val sockets: IndexedSeq[String], workers: IndexedSeq[Option[ProcessHandle]], val root: File,
    socketDir: Option[File]) {
  private val pools = sockets.map(_ => new ConcurrentLinkedQueue[ServerConnection]())
  private val connections = ConcurrentHashMap.newKeySet[ServerConnection]()
  private val tree: Seq[ProcessHandle] = process.toHandle +: workers.flatten
  @volatile private var dead = false
  @volatile private[ttlstate] var killedBecause: String = _
  /** Set when ttlstate stops the server on purpose (the application ended, the JVM exits): a task
   *  still using it then ends as stopped, not with a false "the server died". */
  @volatile private[ttlstate] var stoppedBecause: String = _
  private[ttlstate] val shutdownHook = new Thread(() => stop("the executor's JVM is shutting down"),
    "ttlstate-server-shutdown")

  def pid: Long = process.pid()
  def alive: Boolean = !dead && process.isAlive

  /** Whether the server still runs, judged by its processes, not by one connection: the
   *  supervisor and the process serving `worker` exist and have not exited. A process that
   *  closed our connection by exiting shows it a moment later, so this watches for up to a
   *  second; an unidentified worker counts as gone. */
  private[ttlstate] def runs(worker: Int): Boolean = {
    def up = !dead && process.isAlive && ProcSample.exists(pid) && workers(worker).exists(h => ProcSample.exists(h.pid))
    val until = System.nanoTime() + 1000000000L
    while (up && System.nanoTime() - until < 0 && !Thread.currentThread().isInterrupted) {
      java.util.concurrent.locks.LockSupport.parkNanos(20000000L)
    }
    up
  }
  def isDead: Boolean = dead
  def markDead(): Unit = { dead = true; destroy() }

  private[ttlstate] def track(c: ServerConnection): Unit = connections.add(c)
  private[ttlstate] def untrack(c: ServerConnection): Unit = connections.remove(c)
  private[ttlstate] def connectionsNow: Seq[ServerConnection] = connections.asScala.toSeq

  private def workerLabel(worker: Int): String =
    s"worker $worker (${workers(worker).map(h => s"pid ${h.pid}").getOrElse(sockets(worker))})"

  /** /proc's view of the process serving `worker`, or of the whole server if it is unknown. */
  private[ttlstate] def probe(worker: Int): Option[ProcSample] = workers(worker) match {
    case Some(h) => ProcSample.of(h.pid)
    case None => ProcSample.ofAll(tree.map(_.pid) ++ process.descendants().iterator().asScala.map(_.pid).toSeq)
  }

  def borrow(worker: Int, timeoutNanos: Long): ServerConnection = {
    var candidate = pools(worker).poll()
    while (candidate != null && candidate.broken) { candidate.close(); candidate = pools(worker).poll() }
    if (candidate != null) { candidate.pooled.set(false); candidate.timeoutNanos = timeoutNanos; candidate }
    else new ServerConnection(this, worker, timeoutNanos)
  }

  def giveBack(conn: ServerConnection, worker: Int): Unit = {
    if (conn.broken || dead) conn.close()
    else if (!conn.pooled.getAndSet(true)) pools(worker).offer(conn)
    else throw new IllegalStateException("ttlstate: a state server connection was returned twice")
  }

  /** The watchdog's verdict: `worker` did not answer within the deadline and shows no sign of
   *  work. SIGKILL (which also ends stopped processes) for the workers and the supervisor, then
   *  close every connection, so each blocked task fails now with this reason. */
  private[ttlstate] def killUnresponsive(worker: Int, timeoutNanos: Long, waitedNanos: Long, why: String): Unit = {
    if (killedBecause == null) {
      killedBecause = s"ttlstate state server (pid $pid), ${workerLabel(worker)}, did not answer a request " +
        s"within the deadline of ${Watchdog.millis(timeoutNanos)} (${ConfKeys.REQUEST_TIMEOUT}; waited " +
        s"${Watchdog.millis(waitedNanos)}) and showed no sign of work: $why. ttlstate killed the server; " +
        "Spark's retry of the task starts a new one, which reloads the store from the checkpoint."
      StateServer.log.warn(killedBecause)
    }
    dead = true
    (tree ++ process.descendants().iterator().asScala).foreach(_.destroyForcibly())
    connections.forEach(_.close())
    destroy()
  }

  /** Stops the server on purpose, saying why to any task still using it. */
  def stop(reason: String): Unit = {
    if (stoppedBecause == null) stoppedBecause = reason
    destroy()
  }

  /** Graceful first: EOF on its stdin makes the server stop its workers and remove its root.
   *  Then anything of it still there is killed (a stopped worker never reads its EOF). */
  def destroy(): Unit = {
    dead = true
    pools.foreach { p => var c = p.poll(); while (c != null) { c.close(); c = p.poll() } }
    try stdin.close() catch { case _: IOException => }
    // A stopped supervisor never reads its EOF: no point waiting for it.
    val stopped = ProcSample.of(pid).exists(_.stopped)
    if (stopped || !process.waitFor(10, TimeUnit.SECONDS)) {
      process.destroyForcibly()
      process.waitFor(10, TimeUnit.SECONDS)
    }
    // Whatever of it is left: a stopped worker never reads its EOF, and one whose supervisor was
    // killed is no longer its child, but its command line still names our root.
    StateServer.kill(workers.flatten ++ StateServer.processesUnder(root))
    // A server that exits normally removes its root; one killed with -9 cannot (sockets and
    // local stores, only a cache: the checkpoint has everything).
    (root +: socketDir.toSeq).foreach(FileUtil.fullyDelete) // does not follow symlinks
    try Runtime.getRuntime.removeShutdownHook(shutdownHook) catch { case _: IllegalStateException => }
  }
}

/** One state server per executor JVM, started on first use (never in a constructor). */
object StateServer {
  private[ttlstate] val log: org.slf4j.Logger = org.slf4j.LoggerFactory.getLogger("ttlstate.spark.StateServer")
  private val generations = new AtomicLong(0)

  @volatile private var current: RunningServer = _

  /** The running server, if any; never starts one (maintenance and close must not). */
  def running: Option[RunningServer] = Option(current).filter(_.alive)

  def get(python: String, workers: Int, timeoutNanos: Long): RunningServer = synchronized {
    // The server validates every key at OPEN, but it reads --workers before any OPEN.
    val spec = ConfKeys.spec(ConfKeys.WORKERS)
    if (ConfValues.number(spec, workers.toString).isEmpty) {
      throw new IllegalArgumentException(s"Invalid value '$workers' for conf '${ConfKeys.WORKERS}': allowed ${spec.allowed}")
    }
    val s = current
    if (s != null && s.alive) s
    else {
      if (s != null) s.destroy()
      refuseAfterApplicationEnd()
      current = start(python, workers, timeoutNanos)
      endedEnv = null
      current
    }
  }

  /** The SparkEnv of the application whose end stopped the server (local mode): its tasks still
   *  running must not start a new server (it would outlive the application in the driver JVM);
   *  a later application in the same JVM has a new SparkEnv and starts one. */
  @volatile private var endedEnv: SparkEnv = _

  private def refuseAfterApplicationEnd(): Unit = {
    val ended = endedEnv
    val env = SparkEnv.get
    if (ended != null && (env == null || (env eq ended))) {
      throw new ServerStopped("ttlstate: the application ended (spark.stop()) while this task " +
        "still ran: no state server is started for it; the task ends without committing.", null)
    }
  }

  private def socketName(worker: Int) = s"w$worker.sock"

  /** A private (0700) directory for the server under Spark's own local dirs for this executor
   *  (`SparkLocalDirs`: the cluster manager's dirs, SPARK_LOCAL_DIRS, spark.local.dir, in Spark's
   *  order), one picked at random as Spark's RocksDB provider does. A dir that cannot be used is
   *  skipped, as Spark's block manager does; none usable is an error, never a silent fallback. */
  private def localRoot(): File = {
    val conf = Option(SparkEnv.get).map(_.conf).getOrElse(new SparkConf(false))
    val dirs = SparkLocalDirs.configured(conf).map(_.trim).filter(_.nonEmpty).toList
    val start = if (dirs.isEmpty) 0 else Random.nextInt(dirs.size)
    def createIn(d: String): File = {
      val dir = new File(d)
      if (!dir.isDirectory && !dir.mkdirs() && !dir.isDirectory) throw new IOException("cannot create it")
      privateDir(dir.toPath, "ttlstate-")
    }
    @tailrec def first(rest: List[String], failed: List[String]): File = rest match {
      case d :: more => Try(createIn(d)) match {
        case Success(root) => root
        case Failure(e) =>
          StateServer.log.warn(s"ttlstate: skipping Spark local dir $d for the state server: $e")
          first(more, s"$d ($e)" :: failed)
      }
      case Nil => throw new IllegalStateException("ttlstate: cannot create the state server's directory in " +
        "any of Spark's local dirs (spark.local.dir, SPARK_LOCAL_DIRS or the cluster manager's): " +
        failed.reverse.mkString("; "))
    }
    first(dirs.drop(start) ++ dirs.take(start), Nil)
  }

  private def privateDir(parent: java.nio.file.Path, prefix: String): File =
    Files.createTempDirectory(parent, prefix,
      PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"))).toFile

  /** Unix socket paths are limited (UnixSocketPaths: 106 bytes on Java 17). If the sockets do
   *  not fit under `root`, only they go to a short private directory of their own
   *  (java.io.tmpdir, else /tmp), removed with the server; the state stays under `root`. */
  private[server] def socketDirFor(root: File, workers: Int): Option[File] = {
    def fits(dir: String) = UnixSocketPaths.fits(s"$dir/${socketName(workers - 1)}")
    if (fits(root.getAbsolutePath)) None
    else {
      val base = Option(System.getProperty("java.io.tmpdir")).filter(fits).getOrElse("/tmp")
      val dir = privateDir(java.nio.file.Paths.get(base), "ttls-")
      StateServer.log.info(s"ttlstate: $root is too deep for Unix socket paths; the sockets go to $dir")
      Some(dir)
    }
  }

  /** Every process whose command line names `root` or a path under it: a server's supervisor
   *  and workers, also workers reparented after their supervisor died. */
  private[ttlstate] def processesUnder(root: File): Seq[ProcessHandle] = {
    val path = root.getAbsolutePath
    ProcessHandle.allProcesses().iterator().asScala.filter { h =>
      h.info().arguments().map[Boolean](_.exists(a => a == path || a.startsWith(path + File.separator))).orElse(false)
    }.toSeq
  }

  /** SIGKILL (which also ends stopped processes), then wait a bounded time for each to exit. */
  private[ttlstate] def kill(processes: Seq[ProcessHandle]): Unit = {
    val alive = processes.filter(_.isAlive)
    alive.foreach(_.destroyForcibly())
    alive.foreach(h => Try(h.onExit().get(10, TimeUnit.SECONDS)))
  }

  private val LocalMaster = """local(?:\[(\*|\d+)(?:,\d+)?\])?""".r

  /** The cores of this executor, the default number of workers (`...ttlstate.workers` = 0).
   *  Local mode (the executor is the driver JVM): the master's thread count, as Spark runs
   *  tasks. Otherwise the `--cores` the cluster manager launched this executor with (standalone,
   *  YARN and Kubernetes backends all take it; standalone without `spark.executor.cores` gives
   *  an executor all of its worker's cores, known only there), then `spark.executor.cores`,
   *  then the processors the JVM sees. */
  private[ttlstate] def executorCores(): Int = {
    val env = SparkEnv.get
    val conf = Option(env).map(_.conf)
    val local = conf.filter(_ => env.executorId == "driver").flatMap(_.getOption("spark.master")).collect {
      case LocalMaster(null) => 1
      case LocalMaster("*") => Runtime.getRuntime.availableProcessors
      case LocalMaster(n) => n.toInt
    }
    def launchedWith: Option[Int] = {
      val args = ProcessHandle.current().info().arguments().orElse(Array.empty[String]).toSeq
      args.sliding(2).collectFirst { case Seq("--cores", n) if n.nonEmpty && n.length < 6 && n.forall(_.isDigit) => n.toInt }
    }
    local.orElse(launchedWith)
      .orElse(conf.flatMap(_.getOption("spark.executor.cores")).flatMap(v => scala.util.Try(v.trim.toInt).toOption))
      .filter(_ > 0).getOrElse(Runtime.getRuntime.availableProcessors)
  }

  private def start(python: String, configuredWorkers: Int, timeoutNanos: Long): RunningServer = {
    val root = localRoot()
    val workers = if (configuredWorkers > 0) configuredWorkers else executorCores()
    val socketDir = try socketDirFor(root, workers) catch { case e: IOException => FileUtil.fullyDelete(root); throw e }
    val pb = new ProcessBuilder((Seq(python, "-m", "ttlstate.server", "--root", root.getAbsolutePath,
      "--workers", workers.toString) ++ socketDir.toSeq.flatMap(d => Seq("--socket-dir", d.getAbsolutePath))).asJava)
    pb.redirectError(ProcessBuilder.Redirect.INHERIT)
    def removeDirs(): Unit = (root +: socketDir.toSeq).foreach(FileUtil.fullyDelete)
    val process = try pb.start() catch {
      case e: IOException =>
        removeDirs()
        throw new IllegalStateException(
          s"ttlstate: cannot start the state server with interpreter '$python' (${e.getMessage}). " +
            ServerPython.howToSet, e)
    }
    // A server that did not start: it and its workers (also ones already orphaned) go.
    def abandon(): Unit = {
      kill(process.toHandle +: processesUnder(root))
      removeDirs()
    }
    val line = try awaitReady(process, timeoutNanos) catch { case e: Throwable => abandon(); throw e }
    if (line == null || !line.startsWith("READY ")) {
      abandon()
      throw new IllegalStateException(startFailure(python, line, if (process.isAlive) None else Some(process.exitValue())))
    }
    // Every worker is up (the supervisor waited for each one's READY): `<pid>@<socket>` each.
    val entries = line.stripPrefix("READY ").trim.split(" ").toIndexedSeq.map(readyEntry)
    val server = new RunningServer(generations.incrementAndGet(), process, process.getOutputStream,
      entries.map(_._2), entries.map(_._1), root, socketDir)
    Runtime.getRuntime.addShutdownHook(server.shutdownHook)
    val watchdog = new Thread(new Watchdog(server), s"ttlstate-watchdog-${server.generation}")
    watchdog.setDaemon(true)
    watchdog.start()
    server
  }

  /** Why the server did not start, from the line it printed instead of READY: its own reason
   *  (`FAILED <reason>`: it ran, but its workers did not start), or nothing, when the interpreter
   *  failed before the server ran (as one without ttlstate does). */
  private[server] def startFailure(python: String, line: String, exit: Option[Int]): String = {
    val how = s"interpreter '$python', exit ${exit.fold("n/a")(_.toString)}"
    Option(line).filter(_.startsWith("FAILED ")).map(_.stripPrefix("FAILED ").trim) match {
      case Some(reason) =>
        s"ttlstate: the state server did not start ($how): $reason. The executor's stderr has the server's error."
      case None =>
        s"ttlstate: the state server did not start ($how). Is ttlstate installed for that interpreter? " +
          s"${ServerPython.howToSet} The executor's stderr has the server's error."
    }
  }

  /** One worker of the READY line: its process (None if it is gone already) and socket. */
  private[server] def readyEntry(entry: String): (Option[ProcessHandle], String) = {
    val at = entry.indexOf('@')
    val pid = if (at > 0) scala.util.Try(entry.substring(0, at).toLong).toOption else None
    val worker = pid.flatMap { p => val h = ProcessHandle.of(p); if (h.isPresent) Some(h.get) else None }
    (worker, if (pid.isDefined) entry.substring(at + 1) else entry)
  }

  /** The supervisor's READY line (null: it exited first). Starting is watched like a request:
   *  no line within the deadline while neither the supervisor nor a worker shows a sign of work
   *  (CPU time, a thread running or in disk I/O) is an error. */
  private def awaitReady(process: Process, timeoutNanos: Long): String = {
    val line = new CompletableFuture[String]()
    val reader = new Thread(() => line.complete(
      Try(new BufferedReader(new InputStreamReader(process.getInputStream)).readLine()).getOrElse(null)),
      "ttlstate-server-start")
    reader.setDaemon(true)
    reader.start()
    val started = System.nanoTime()
    val vigil = new Vigil(started)
    val tickMs = Watchdog.tickNanos(Seq(timeoutNanos)) / 1000000L
    var ready: Option[String] = None
    while (ready.isEmpty) {
      try ready = Some(line.get(tickMs, TimeUnit.MILLISECONDS))
      catch {
        case _: TimeoutException =>
          val now = System.nanoTime()
          vigil.probe(ProcSample.ofAll(process.pid +: process.descendants().iterator().asScala.map(_.pid).toSeq), now)
          if (vigil.hung(started, timeoutNanos, now)) {
            throw new IllegalStateException(s"ttlstate: the state server (pid ${process.pid}) did not start within " +
              s"the deadline of ${Watchdog.millis(timeoutNanos)} (${ConfKeys.REQUEST_TIMEOUT}): ${vigil.why}. " +
              "It was killed; the task fails and Spark's retry tries again.")
          }
      }
    }
    ready.get
  }

  /** Stops the server now (the next use starts a new one). */
  def shutdown(): Unit = synchronized {
    if (current != null) {
      current.stop("the application ended (spark.stop())")
      current = null
    }
  }

  /** The application ended (local mode): the server stops, and the application's tasks still
   *  running start no new one (`refuseAfterApplicationEnd`). */
  private def applicationEnded(): Unit = synchronized {
    endedEnv = SparkEnv.get
    shutdown()
  }

  @volatile private var listening: SparkContext = _

  /** In local mode the executor is the driver JVM, which outlives `spark.stop()`: stop the
   *  server with the application. On a cluster the executor JVM exits and the server follows
   *  it through EOF on its stdin. Called from provider init, i.e. while a context is active. */
  def watchApplication(): Unit = synchronized {
    val env = SparkEnv.get
    // No active context: the application is stopping, and its end stops the server anyway.
    if (env != null && env.executorId == "driver") SparkActiveContext.get.foreach { sc =>
      if (listening ne sc) {
        listening = sc
        sc.addSparkListener(new SparkListener {
          override def onApplicationEnd(end: SparkListenerApplicationEnd): Unit = applicationEnded()
        })
      }
    }
  }
}
