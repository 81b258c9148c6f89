package ttlstate.spark

import java.io.{BufferedInputStream, BufferedOutputStream, BufferedReader, DataInputStream, File, IOException, InputStreamReader, OutputStream}
import java.net.UnixDomainSocketAddress
import java.nio.channels.{Channels, SocketChannel}
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.{ConcurrentLinkedQueue, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import org.apache.hadoop.fs.FileUtil
import org.apache.spark.{SparkContext, SparkEnv}
import org.apache.spark.scheduler.{SparkListener, SparkListenerApplicationEnd}

/** The failure of a request, as the server reported it (code from Protocol.ERR_*). */
final class ServerError(val code: Int, val message: String) extends RuntimeException(message)

/** The state server is gone (killed, crashed, or closed the connection). */
final class ServerDied(message: String, cause: Throwable) extends RuntimeException(message, cause)

/** One connection to one worker. Used by one thread at a time (a task or a maintenance call). */
final class ServerConnection(val server: RunningServer, socketPath: String) {
  private val channel = SocketChannel.open(UnixDomainSocketAddress.of(socketPath))
  private val out = new BufferedOutputStream(Channels.newOutputStream(channel), 1 << 16)
  private val in = new DataInputStream(new BufferedInputStream(Channels.newInputStream(channel), 1 << 16))
  @volatile var broken = false
  // True while in the pool: a connection must never be handed to two users at once.
  private[spark] val pooled = new java.util.concurrent.atomic.AtomicBoolean(false)

  locally {
    val r = call(new PayloadWriter().u32(Protocol.MAGIC).u32(Protocol.PROTOCOL_VERSION).frame(Protocol.OP_HELLO), null)
    val version = r.u32()
    if (version != Protocol.PROTOCOL_VERSION) {
      throw new IllegalStateException(s"ttlstate state server speaks protocol $version, shim ${Protocol.PROTOCOL_VERSION}")
    }
  }

  private def died(e: Throwable): Nothing = {
    broken = true
    server.markDead()
    throw new ServerDied(s"ttlstate state server (pid ${server.pid}) died or closed the connection " +
      s"(${e.getClass.getSimpleName}: ${e.getMessage}); the task fails and Spark's retry starts a new " +
      "server, which reloads the store from the checkpoint. Check the executor's stderr for the server's log.", e)
  }

  /** Sends a frame with no reply expected (pipelined writes). */
  def send(frame: Array[Byte]): Unit = try out.write(frame) catch { case e: IOException => died(e) }

  /** A synchronous request: serves checkpoint callbacks until the server answers. */
  def call(frame: Array[Byte], files: CheckpointFiles): PayloadReader = {
    try {
      out.write(frame)
      out.flush()
      while (true) {
        val (code, r) = Wire.readFrame(in)
        code match {
          case Protocol.RESP_OK => return r
          case Protocol.RESP_ERROR =>
            val errCode = r.u16()
            throw new ServerError(errCode, r.str())
          case Protocol.RESP_CALLBACK =>
            val kind = r.u8()
            if (files == null) throw new IllegalStateException("ttlstate: unexpected checkpoint callback")
            out.write(files.serve(kind, r))
            out.flush()
          case other => throw new IllegalStateException(s"ttlstate protocol error: unexpected frame $other")
        }
      }
      throw new IllegalStateException("unreachable")
    } catch {
      case e: IOException => died(e)
    }
  }

  def close(): Unit = try channel.close() catch { case _: IOException => }
}

/** A started server process and a pool of connections per worker socket. */
final class RunningServer(val generation: Long, process: Process, stdin: OutputStream,
    val sockets: IndexedSeq[String], val root: File) {
  private val pools = sockets.map(_ => new ConcurrentLinkedQueue[ServerConnection]())
  @volatile private var dead = false

  def pid: Long = process.pid()
  def alive: Boolean = !dead && process.isAlive
  def markDead(): Unit = { dead = true; destroy() }

  def borrow(worker: Int): ServerConnection = {
    var candidate = pools(worker).poll()
    while (candidate != null && candidate.broken) { candidate.close(); candidate = pools(worker).poll() }
    if (candidate != null) { candidate.pooled.set(false); candidate }
    else {
      try new ServerConnection(this, sockets(worker))
      catch {
        case e: IOException =>
          markDead()
          throw new ServerDied(s"ttlstate: cannot connect to state server worker ${sockets(worker)}: ${e.getMessage}", e)
      }
    }
  }

  def giveBack(conn: ServerConnection, worker: Int): Unit = {
    if (conn.broken || dead) conn.close()
    else if (!conn.pooled.getAndSet(true)) pools(worker).offer(conn)
    else throw new IllegalStateException("ttlstate: a state server connection was returned twice")
  }

  /** Graceful first: EOF on its stdin makes the server stop its workers and remove its root. */
  def destroy(): Unit = {
    pools.foreach { p => var c = p.poll(); while (c != null) { c.close(); c = p.poll() } }
    try stdin.close() catch { case _: IOException => }
    if (!process.waitFor(10, TimeUnit.SECONDS)) { process.destroyForcibly(); process.waitFor(10, TimeUnit.SECONDS) }
    // A server that exits normally removes its root; one killed with -9 cannot (sockets and
    // local stores, only a cache: the checkpoint has everything).
    FileUtil.fullyDelete(root) // does not follow symlinks
  }
}

/** One state server per executor JVM, started on first use (never in a constructor). */
object StateServer {
  private val generations = new AtomicLong(0)
  private val MaxWorkers = 1024 // as python/ttlstate/config/store_config.py

  @volatile private var current: RunningServer = _

  /** The running server, if any; never starts one (maintenance and close must not). */
  def running: Option[RunningServer] = Option(current).filter(_.alive)

  def get(python: String, workers: Int): RunningServer = synchronized {
    // The server validates every key at OPEN, but it reads --workers before any OPEN.
    if (workers < 0 || workers > MaxWorkers) {
      throw new IllegalArgumentException(s"Invalid value '$workers' for conf '${ConfKeys.WORKERS}': " +
        s"allowed an integer in [0, $MaxWorkers] (0 = one per executor core)")
    }
    val s = current
    if (s != null && s.alive) s
    else {
      if (s != null) s.destroy()
      current = start(python, workers)
      current
    }
  }

  private def localRoot(): File = {
    val candidates = Option(System.getenv("SPARK_LOCAL_DIRS")).toSeq.flatMap(_.split(",")) ++
      Option(System.getProperty("java.io.tmpdir")).toSeq
    val base = candidates.map(new File(_)).find(d => d.isDirectory && d.canWrite).getOrElse(new File("/tmp"))
    // Unix socket paths are limited to ~107 bytes; fall back to /tmp if the local dir is deep.
    val usable = if (base.getAbsolutePath.length > 60) new File("/tmp") else base
    Files.createTempDirectory(usable.toPath, "ttlstate-",
      PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"))).toFile
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

  private def start(python: String, configuredWorkers: Int): RunningServer = {
    val root = localRoot()
    val workers = if (configuredWorkers > 0) configuredWorkers else executorCores()
    val pb = new ProcessBuilder(python, "-m", "ttlstate.server", "--root", root.getAbsolutePath,
      "--workers", workers.toString)
    pb.redirectError(ProcessBuilder.Redirect.INHERIT)
    val process = try pb.start() catch {
      case e: IOException => throw new IllegalStateException(
        s"ttlstate: cannot start the state server with interpreter '$python' (${e.getMessage}). Set " +
          s"${ConfKeys.PYTHON} or PYSPARK_PYTHON to a Python with ttlstate installed.", e)
    }
    val line = new BufferedReader(new InputStreamReader(process.getInputStream)).readLine()
    if (line == null || !line.startsWith("READY ")) {
      process.destroy()
      throw new IllegalStateException(
        s"ttlstate: the state server did not start (interpreter '$python', exit " +
          s"${if (process.isAlive) "n/a" else process.exitValue().toString}). Is ttlstate installed for that " +
          s"interpreter? Set ${ConfKeys.PYTHON} or PYSPARK_PYTHON. The executor's stderr has the server's error.")
    }
    val sockets = line.stripPrefix("READY ").trim.split(" ").toIndexedSeq
    val server = new RunningServer(generations.incrementAndGet(), process, process.getOutputStream, sockets, root)
    Runtime.getRuntime.addShutdownHook(new Thread(() => server.destroy(), "ttlstate-server-shutdown"))
    server
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
