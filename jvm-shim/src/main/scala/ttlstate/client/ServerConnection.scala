package ttlstate.client

import java.io.{BufferedInputStream, BufferedOutputStream, BufferedReader, DataInputStream, File, IOException, InputStreamReader, InterruptedIOException, OutputStream}
import java.net.{StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.channels.{ClosedByInterruptException, ClosedChannelException, SocketChannel}
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
import ttlstate.server.RunningServer

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

/** ttlstate stopped the state server on purpose (the application ended, the executor's JVM is
 *  exiting) while this thread still used it. An `InterruptedIOException`, as for a cancelled
 *  task: Spark is stopping the task's work anyway, and nothing here died. */
final class ServerStopped(message: String, cause: Throwable) extends InterruptedIOException(message) {
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
  @volatile private[ttlstate] var timeoutNanos: Long = timeout
  @volatile private[ttlstate] var waitingSince: Long = ServerConnection.Idle
  @volatile private[ttlstate] var frames = 0L
  @volatile private[ttlstate] var serving = false
  @volatile var broken = false
  // The channel was closed by an interrupt of the thread using it (NIO closes it then)...
  @volatile private var closedByInterrupt = false
  // ... or by `close()` here: either way not a sign of the server's health.
  @volatile private var closedHere = false
  // True while in the pool: a connection must never be handed to two users at once.
  private[ttlstate] val pooled = new java.util.concurrent.atomic.AtomicBoolean(false)
  private val channel = SocketChannel.open(StandardProtocolFamily.UNIX) // connected below, watched
  private val out = new BufferedOutputStream(SlicedChannelStreams.output(channel), 1 << 16)
  private val in = new DataInputStream(new BufferedInputStream(SlicedChannelStreams.input(channel), 1 << 16))

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
    if (server.killedBecause == null && server.stoppedBecause != null) {
      close()
      throw new ServerStopped(s"ttlstate: the state server (pid ${server.pid}) was stopped because " +
        s"${server.stoppedBecause} while this task still used it; the task ends without committing.", e)
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

  /** Sends a frame with no reply expected (pipelined writes) whose payload is `parts` in order,
   *  written from the writers' own buffers (a batch of writes is not copied into a frame). */
  def send(code: Int, parts: PayloadWriter*): Unit = try waiting {
    val n = parts.map(_.size).sum
    out.write(java.nio.ByteBuffer.allocate(5).putInt(n + 1).put(code.toByte).array)
    parts.foreach(_.writeTo(out))
  } catch { case e: IOException => failed(e) }

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
