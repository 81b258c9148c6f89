package ttlstate.spark

import java.io.{BufferedInputStream, BufferedOutputStream, BufferedReader, DataInputStream, File, IOException, InputStreamReader, InterruptedIOException, OutputStream}
import java.net.{StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.channels.{Channels, ClosedByInterruptException, ClosedChannelException, SocketChannel}
import java.nio.charset.StandardCharsets.UTF_8
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
import org.apache.spark.ttlstate.SparkLocalDirs

/** The failure of a request, as the server reported it (code from Protocol.ERR_*). */
final class ServerError(val code: Int, val message: String) extends RuntimeException(message)

/** The state server is gone (killed, crashed, or closed the connection). */
final class ServerDied(message: String, cause: Throwable) extends RuntimeException(message, cause)

/** This thread was interrupted (Spark killed or cancelled its task: `query.stop()`, a job group
 *  cancel, the UI's kill, a losing speculative attempt), which closed its own connection. Only
 *  that connection is gone: the server and every other connection are untouched, and the server
 *  ends the connection's open transaction as an abort. An `InterruptedIOException`, so Spark
 *  reports the task as killed, and a stream's thread as stopped, not as failed. */
final class ConnectionInterrupted(message: String, cause: Throwable) extends InterruptedIOException(message) {
  initCause(cause)
}

/** The server closed this connection in the middle of a request, but its processes still run:
 *  only this connection is gone (the server drops what it left uncommitted). The task fails;
 *  its retry opens a new connection to the same server. */
final class ConnectionLost(message: String, cause: Throwable) extends RuntimeException(message, cause)

/** One connection to one worker. Used by one thread at a time (a task or a maintenance call).
 *
 *  Every blocking step (connect, send, waiting for a frame) is visible to the server's
 *  `Watchdog`: `waitingSince` is set while this thread waits on the server, `frames` counts what
 *  arrived, `serving` is set while the JVM serves a checkpoint callback for the server. */
final class ServerConnection(val server: RunningServer, val worker: Int, timeout: Long) {
  @volatile private[spark] var timeoutNanos: Long = timeout
  @volatile private[spark] var waitingSince: Long = ServerConnection.Idle
  @volatile private[spark] var frames = 0L
  @volatile private[spark] var serving = false
  @volatile var broken = false
  // The channel was closed by an interrupt of the thread using it (NIO closes it then)...
  @volatile private var closedByInterrupt = false
  // ... or by `close()` here: either way not a sign of the server's health.
  @volatile private var closedHere = false
  // True while in the pool: a connection must never be handed to two users at once.
  private[spark] val pooled = new java.util.concurrent.atomic.AtomicBoolean(false)
  private val channel = SocketChannel.open(StandardProtocolFamily.UNIX) // connected below, watched
  private val out = new BufferedOutputStream(Channels.newOutputStream(channel), 1 << 16)
  private val in = new DataInputStream(new BufferedInputStream(Channels.newInputStream(channel), 1 << 16))

  locally {
    server.track(this)
    try {
      try waiting(channel.connect(UnixDomainSocketAddress.of(server.sockets(worker))))
      catch { case e: IOException => failed(e, connecting = true) }
      val r = call(new PayloadWriter().u32(Protocol.MAGIC).u32(Protocol.PROTOCOL_VERSION).frame(Protocol.OP_HELLO), null)
      val version = r.u32()
      if (version != Protocol.PROTOCOL_VERSION) {
        throw new IllegalStateException(s"ttlstate state server speaks protocol $version, shim ${Protocol.PROTOCOL_VERSION}")
      }
    } catch { case e: Throwable => close(); throw e }
  }

  private def waiting[T](io: => T): T = {
    waitingSince = System.nanoTime()
    try io finally waitingSince = ServerConnection.Idle
  }

  /** An I/O failure of this connection. An interrupt of this thread (now, or in an earlier call
   *  that closed the channel) ends this connection alone. Otherwise the server's processes say
   *  whether it died (`RunningServer.runs`): a live server that closed one connection stays, but
   *  one whose worker socket refuses a connection is replaced. */
  private def failed(e: IOException, connecting: Boolean = false): Nothing = {
    broken = true
    if (e.isInstanceOf[ClosedByInterruptException] || Thread.currentThread().isInterrupted) closedByInterrupt = true
    if (server.killedBecause == null && (closedByInterrupt || (closedHere && e.isInstanceOf[ClosedChannelException]))) {
      close()
      throw new ConnectionInterrupted(s"ttlstate: this thread was interrupted (Spark killed or cancelled its task, " +
        s"or is stopping), which closed its connection to worker $worker of the state server (pid ${server.pid}); " +
        "the server goes on serving, and drops the connection's uncommitted writes.", e)
    }
    if (!connecting && server.killedBecause == null && server.runs(worker)) {
      close()
      throw new ConnectionLost(s"ttlstate state server (pid ${server.pid}) closed the connection to worker $worker " +
        s"in the middle of a request (${e.getClass.getSimpleName}: ${e.getMessage}), but its processes still run: " +
        "the task fails and Spark's retry connects again; the server dropped the task's uncommitted writes. " +
        "Check the executor's stderr for the server's log.", e)
    }
    val what = if (connecting) s"cannot be connected to at worker $worker (${server.sockets(worker)})"
      else "died or closed the connection"
    server.markDead()
    val message = Option(server.killedBecause).getOrElse(s"ttlstate state server (pid ${server.pid}) $what " +
      s"(${e.getClass.getSimpleName}: ${e.getMessage}); the task fails and Spark's retry starts a new " +
      "server, which reloads the store from the checkpoint. Check the executor's stderr for the server's log.")
    throw new ServerDied(message, e)
  }

  /** Sends a frame with no reply expected (pipelined writes). */
  def send(frame: Array[Byte]): Unit = try waiting(out.write(frame)) catch { case e: IOException => failed(e) }

  /** A synchronous request: serves checkpoint callbacks until the server answers. */
  def call(frame: Array[Byte], files: CheckpointFiles): PayloadReader = {
    waitingSince = System.nanoTime()
    try {
      out.write(frame)
      out.flush()
      while (true) {
        val (code, r) = Wire.readFrame(in)
        frames += 1
        code match {
          case Protocol.RESP_OK => return r
          case Protocol.RESP_ERROR =>
            val errCode = r.u16()
            throw new ServerError(errCode, r.str())
          case Protocol.RESP_CALLBACK =>
            val kind = r.u8()
            if (files == null) throw new IllegalStateException("ttlstate: unexpected checkpoint callback")
            serving = true
            val reply = try files.serve(kind, r) finally serving = false
            out.write(reply)
            out.flush()
          case other => throw new IllegalStateException(s"ttlstate protocol error: unexpected frame $other")
        }
      }
      throw new IllegalStateException("unreachable")
    } catch {
      case e: IOException => failed(e)
      case e: ServerError => throw e // a whole error frame: the stream is still in step
      case e: Throwable => broken = true; throw e // anything else may leave a frame half read
    } finally waitingSince = ServerConnection.Idle
  }

  /** Also from the watchdog's thread: a read or write blocked in another thread fails at once. */
  def close(): Unit = {
    closedHere = true
    broken = true
    server.untrack(this)
    try channel.close() catch { case _: IOException => }
  }
}

object ServerConnection {
  val Idle: Long = Long.MinValue
}

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
  @volatile private[spark] var killedBecause: String = _
  private[spark] val shutdownHook = new Thread(() => destroy(), "ttlstate-server-shutdown")

  def pid: Long = process.pid()
  def alive: Boolean = !dead && process.isAlive

  /** Whether the server still runs, judged by its processes, not by one connection: the
   *  supervisor and the process serving `worker` exist and have not exited. A process that
   *  closed our connection by exiting shows it a moment later, so this watches for up to a
   *  second; an unidentified worker counts as gone. */
  private[spark] def runs(worker: Int): Boolean = {
    def up = !dead && process.isAlive && ProcSample.exists(pid) && workers(worker).exists(h => ProcSample.exists(h.pid))
    val until = System.nanoTime() + 1000000000L
    while (up && System.nanoTime() - until < 0 && !Thread.currentThread().isInterrupted) {
      java.util.concurrent.locks.LockSupport.parkNanos(20000000L)
    }
    up
  }
  def isDead: Boolean = dead
  def markDead(): Unit = { dead = true; destroy() }

  private[spark] def track(c: ServerConnection): Unit = connections.add(c)
  private[spark] def untrack(c: ServerConnection): Unit = connections.remove(c)
  private[spark] def connectionsNow: Seq[ServerConnection] = connections.asScala.toSeq

  private def workerLabel(worker: Int): String =
    s"worker $worker (${workers(worker).map(h => s"pid ${h.pid}").getOrElse(sockets(worker))})"

  /** /proc's view of the process serving `worker`, or of the whole server if it is unknown. */
  private[spark] def probe(worker: Int): Option[ProcSample] = workers(worker) match {
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
  private[spark] def killUnresponsive(worker: Int, timeoutNanos: Long, waitedNanos: Long, why: String): Unit = {
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
  private[spark] val log: org.slf4j.Logger = org.slf4j.LoggerFactory.getLogger("ttlstate.spark.StateServer")
  private val generations = new AtomicLong(0)
  private val MaxWorkers = 1024 // as python/ttlstate/config/store_config.py

  @volatile private var current: RunningServer = _

  /** The running server, if any; never starts one (maintenance and close must not). */
  def running: Option[RunningServer] = Option(current).filter(_.alive)

  def get(python: String, workers: Int, timeoutNanos: Long): RunningServer = synchronized {
    // The server validates every key at OPEN, but it reads --workers before any OPEN.
    if (workers < 0 || workers > MaxWorkers) {
      throw new IllegalArgumentException(s"Invalid value '$workers' for conf '${ConfKeys.WORKERS}': " +
        s"allowed an integer in [0, $MaxWorkers] (0 = one per executor core)")
    }
    val s = current
    if (s != null && s.alive) s
    else {
      if (s != null) s.destroy()
      current = start(python, workers, timeoutNanos)
      current
    }
  }

  // Linux's sun_path holds 108 bytes with the terminating NUL.
  private val MaxSocketPath = 107
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

  /** Unix socket paths are limited to 107 bytes. If the sockets do not fit under `root`, only
   *  they go to a short private directory of their own (java.io.tmpdir, else /tmp), removed with
   *  the server; the state stays under `root`. */
  private def socketDirFor(root: File, workers: Int): Option[File] = {
    def fits(dir: String) = s"$dir/${socketName(workers - 1)}".getBytes(UTF_8).length <= MaxSocketPath
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
  private[spark] def processesUnder(root: File): Seq[ProcessHandle] = {
    val path = root.getAbsolutePath
    ProcessHandle.allProcesses().iterator().asScala.filter { h =>
      h.info().arguments().map[Boolean](_.exists(a => a == path || a.startsWith(path + File.separator))).orElse(false)
    }.toSeq
  }

  /** SIGKILL (which also ends stopped processes), then wait a bounded time for each to exit. */
  private[spark] def kill(processes: Seq[ProcessHandle]): Unit = {
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
  private[spark] def executorCores(): Int = {
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
          s"ttlstate: cannot start the state server with interpreter '$python' (${e.getMessage}). Set " +
            s"${ConfKeys.PYTHON} or PYSPARK_PYTHON to a Python with ttlstate installed.", e)
    }
    // A server that did not start: it and its workers (also ones already orphaned) go.
    def abandon(): Unit = {
      kill(process.toHandle +: processesUnder(root))
      removeDirs()
    }
    val line = try awaitReady(process, timeoutNanos) catch { case e: Throwable => abandon(); throw e }
    if (line == null || !line.startsWith("READY ")) {
      abandon()
      throw new IllegalStateException(
        s"ttlstate: the state server did not start (interpreter '$python', exit " +
          s"${if (process.isAlive) "n/a" else process.exitValue().toString}). Is ttlstate installed for that " +
          s"interpreter? Set ${ConfKeys.PYTHON} or PYSPARK_PYTHON. The executor's stderr has the server's error.")
    }
    val sockets = line.stripPrefix("READY ").trim.split(" ").toIndexedSeq
    // Every worker is up (the supervisor waited for each one's READY); which one serves which
    // socket is in its command line.
    val bySocket = process.descendants().iterator().asScala.flatMap { h =>
      h.info().arguments().orElse(Array.empty[String]).toSeq.sliding(2).collectFirst {
        case Seq("--socket", path) => path -> h
      }
    }.toMap
    val server = new RunningServer(generations.incrementAndGet(), process, process.getOutputStream, sockets,
      sockets.map(bySocket.get), root, socketDir)
    Runtime.getRuntime.addShutdownHook(server.shutdownHook)
    val watchdog = new Thread(new Watchdog(server), s"ttlstate-watchdog-${server.generation}")
    watchdog.setDaemon(true)
    watchdog.start()
    server
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
      current.destroy()
      current = null
    }
  }

  @volatile private var listening: SparkContext = _

  /** In local mode the executor is the driver JVM, which outlives `spark.stop()`: stop the
   *  server with the application. On a cluster the executor JVM exits and the server follows
   *  it through EOF on its stdin. Called from provider init, i.e. while a context is active. */
  def watchApplication(): Unit = synchronized {
    val env = SparkEnv.get
    if (env != null && env.executorId == "driver") {
      val sc = SparkContext.getOrCreate()
      if (listening ne sc) {
        listening = sc
        sc.addSparkListener(new SparkListener {
          override def onApplicationEnd(end: SparkListenerApplicationEnd): Unit = shutdown()
        })
      }
    }
  }
}
