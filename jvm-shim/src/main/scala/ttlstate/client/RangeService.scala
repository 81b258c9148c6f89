package ttlstate.client

import java.io.{BufferedInputStream, BufferedOutputStream, Closeable, DataInputStream, EOFException, File, FileNotFoundException, IOException}
import java.net.{StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.ByteBuffer
import java.nio.channels.{ServerSocketChannel, SocketChannel}
import java.nio.file.{Files, Paths}
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{ChecksumException, FSDataInputStream, FileUtil, Path}
import org.slf4j.LoggerFactory
import ttlstate.server.UnixSocketPaths

/** Byte ranges of checkpoint files, read through Hadoop for the state server's RocksDB, which
 *  opens a snapshot's SST files in place on a checkpoint only this JVM reaches (HDFS, S3A, ...):
 *  RANGE_READ in python/ttlstate/server/protocol.py. It also answers the server's checkpoint
 *  callbacks for work outside any request (CHECKPOINT_CALL: a snapshot written after its commit
 *  returned), as a request's connection answers them. One Unix socket per JVM, started by the
 *  first store that needs it; a connection is served by a thread of its own, one request at a
 *  time. Only files under a folder registered by `socketFor` are served. */
object RangeService {
  private val log = LoggerFactory.getLogger("ttlstate.spark.RangeService")
  private val SocketName = "range.sock"

  /** RANGE_READ requests answered, and the bytes of file they returned (tests, metrics). */
  val requests = new AtomicLong()
  val bytesServed = new AtomicLong()
  private val connections = new AtomicLong()

  // Folder URI (ending in "/") -> the Hadoop conf its store reads it with.
  private val dirs = new ConcurrentHashMap[String, Configuration]()

  // Registered folder (as registered) -> its files, for CHECKPOINT_CALL.
  private val folders = new ConcurrentHashMap[String, CheckpointFiles]()

  // Lazy: bound on first use; a failed bind is tried again by the next store.
  private lazy val socket: String = listen()

  /** Lets the range service serve the files under `dir` with `hadoopConf` and returns its socket. */
  def socketFor(dir: Path, hadoopConf: Configuration): String = {
    val qualified = dir.getFileSystem(hadoopConf).makeQualified(dir)
    // Also as given: the server asks for the files under the folder as OPEN named it.
    Seq(qualified, dir).foreach(d => dirs.put(d.toString.stripSuffix("/") + "/", hadoopConf))
    socket
  }

  /** The conf of the longest registered folder `uri` lies under. */
  private def confFor(uri: String): Option[Configuration] = {
    val under = dirs.asScala.filter { case (d, _) => uri.startsWith(d) }
    if (under.isEmpty) None else Some(under.maxBy(_._1.length)._2)
  }

  private def listen(): String = {
    val dir = socketDir()
    val path = new File(dir, SocketName)
    // Reverse order on exit: the socket, then its folder.
    dir.deleteOnExit()
    path.deleteOnExit()
    val server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)
    try server.bind(UnixDomainSocketAddress.of(path.toPath)) catch {
      case e: IOException =>
        server.close()
        FileUtil.fullyDelete(dir)
        throw new IOException(s"ttlstate: cannot start the range service at $path: ${e.getMessage}", e)
    }
    val accepting = new Thread(new Runnable { def run(): Unit = accept(server) }, "ttlstate-range-service")
    accepting.setDaemon(true)
    accepting.start()
    log.info(s"ttlstate: range service listening at $path")
    path.getAbsolutePath
  }

  /** A private (0700) folder in java.io.tmpdir, else in /tmp when the socket path would not fit
   *  there (as the state server's sockets fall back: StateServer.socketDirFor). */
  private def socketDir(): File = {
    def privateDir(parent: String) = Files.createTempDirectory(Paths.get(parent), "ttls-range-",
      PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"))).toFile
    val tmp = Option(System.getProperty("java.io.tmpdir")).getOrElse("/tmp")
    val dir = privateDir(tmp)
    if (UnixSocketPaths.fits(new File(dir, SocketName).getAbsolutePath) || tmp == "/tmp") dir
    else {
      FileUtil.fullyDelete(dir)
      privateDir("/tmp")
    }
  }

  private def accept(server: ServerSocketChannel): Unit =
    while (server.isOpen) {
      try {
        val channel = server.accept()
        val t = new Thread(new Connection(channel), s"ttlstate-range-reader-${connections.incrementAndGet()}")
        t.setDaemon(true)
        t.start()
      } catch {
        case NonFatal(e) =>
          log.warn(s"ttlstate range service: accepting a connection failed: $e")
          Thread.sleep(100) // no busy loop while, say, the JVM is out of file descriptors
      }
    }

  private def closeQuietly(c: Closeable): Unit = try c.close() catch { case NonFatal(_) => }

  // Open files kept per connection: RocksDB reads a few files at a time, each many times.
  private val MaxOpenFiles = 16
  // A read buffer up to this size is kept for the connection's next request.
  private val KeptBufferBytes = 1 << 20
  // The largest range a frame carries: code, i32 length, data.
  private val MaxRead = Protocol.MAX_FRAME - 5

  private final class Connection(channel: SocketChannel) extends Runnable {
    private val in = new DataInputStream(new BufferedInputStream(SlicedChannelStreams.input(channel), 1 << 16))
    private val out = new BufferedOutputStream(SlicedChannelStreams.output(channel), 1 << 16)
    private val streams = new java.util.LinkedHashMap[String, FSDataInputStream](MaxOpenFiles, 0.75f, true) {
      override def removeEldestEntry(e: java.util.Map.Entry[String, FSDataInputStream]): Boolean =
        size > MaxOpenFiles && { closeQuietly(e.getValue); true }
    }
    private var buffer = new Array[Byte](1 << 16)

    def run(): Unit =
      try serve() catch {
        case _: EOFException => // the reader closed the connection
        case NonFatal(e) => log.warn(s"ttlstate range service: ${Thread.currentThread.getName} ended: $e")
      } finally {
        streams.values.asScala.foreach(closeQuietly)
        closeQuietly(channel)
      }

    private def serve(): Unit = {
      var open = true
      while (open) {
        val (code, r) = Wire.readFrame(in)
        open = code match {
          case Protocol.OP_HELLO => hello(r)
          case Protocol.RANGE_READ => read(r); true
          case Protocol.CHECKPOINT_CALL => checkpointCall(r); true
          case other => error(Protocol.ERR_BAD_REQUEST, s"ttlstate range service: unknown request $other"); false
        }
        out.flush()
      }
    }

    private def hello(r: PayloadReader): Boolean = {
      val (magic, version) = (r.u32(), r.u32())
      val ok = magic == Protocol.MAGIC && version == Protocol.PROTOCOL_VERSION
      if (ok) out.write(new PayloadWriter().u32(Protocol.PROTOCOL_VERSION).frame(Protocol.RESP_OK))
      else error(Protocol.ERR_PROTOCOL_VERSION, s"ttlstate range service speaks protocol ${Protocol.PROTOCOL_VERSION}; " +
        s"the state server sent version $version (magic 0x${Integer.toHexString(magic)}). Use the jar that " +
        "ships with the installed ttlstate package.")
      ok
    }

    /** A callback of the server's on the files of a registered folder, answered as on a request's
     *  connection (CheckpointFiles.serve). */
    private def checkpointCall(r: PayloadReader): Unit = {
      val folder = r.str()
      val kind = r.u8()
      Option(dirs.get(folder.stripSuffix("/") + "/")) match {
        case Some(conf) =>
          val files = folders.computeIfAbsent(folder, f => new CheckpointFiles(new Path(f), conf))
          out.write(files.serve(kind, r))
        case None => error(Protocol.ERR_BAD_REQUEST, s"ttlstate range service: $folder is not a checkpoint " +
          "folder of a store opened in this JVM")
      }
    }

    private def read(r: PayloadReader): Unit = {
      val uri = r.str()
      val offset = r.i64()
      val length = r.u32()
      requests.incrementAndGet()
      if (offset < 0 || length < 0 || length > MaxRead) {
        error(Protocol.ERR_BAD_REQUEST, s"ttlstate range service: offset $offset, length ${Integer.toUnsignedLong(length)} " +
          s"of $uri is not a range it reads")
      } else {
        serveRange(uri, offset, length)
      }
    }

    private def serveRange(uri: String, offset: Long, length: Int): Unit = {
      // Hadoop's failures, kept apart from this socket's own (which end the connection).
      val got = try Right(opened(uri).map { stream =>
        val data = bufferOf(length)
        (data, readAt(stream, offset, data, length))
      }) catch {
        case NonFatal(e) =>
          // A stream that failed once is not trusted again: the next read opens the file anew.
          Option(streams.remove(uri)).foreach(closeQuietly)
          Left(e)
      }
      got match {
        case Right(Some((data, n))) =>
          bytesServed.addAndGet(n)
          // Written from the read buffer: a range is not copied into a frame.
          out.write(ByteBuffer.allocate(10).putInt(6 + n).put(Protocol.RESP_OK.toByte).put(Protocol.RANGE_DATA.toByte)
            .putInt(n).array)
          out.write(data, 0, n)
        case Right(None) => error(Protocol.ERR_BAD_REQUEST, s"ttlstate range service: $uri is not under a " +
          "checkpoint folder of a store reading in place")
        case Left(_: FileNotFoundException) => answer(Protocol.RANGE_MISSING, "")
        // The file system's own checksums (HDFS's, Hadoop's local .crc files) reject the bytes:
        // damage the server repairs, not a failure a retry may outlast.
        case Left(e: ChecksumException) => answer(Protocol.RANGE_CORRUPT, s"$uri at offset $offset: ${e.getMessage}")
        case Left(e) => error(Protocol.ERR_CHECKPOINT, s"reading checkpoint file $uri at offset $offset, " +
          s"length $length failed: $e")
      }
    }

    /** The connection's buffer when it holds `length` bytes; a larger one is kept up to KeptBufferBytes. */
    private def bufferOf(length: Int): Array[Byte] =
      if (length <= buffer.length) buffer
      else if (length > KeptBufferBytes) new Array[Byte](length)
      else { buffer = new Array[Byte](length); buffer }

    /** The open stream of `uri`, opened now if need be; None for a file it may not read. A stream
     *  in the cache passed the check when it was opened. */
    private def opened(uri: String): Option[FSDataInputStream] = Option(streams.get(uri)).orElse {
      val path = try Some(new Path(uri)) catch { case _: IllegalArgumentException => None }
      // Path normalizes the URI (".." segments), so a file is checked where it really is.
      path.flatMap(p => confFor(p.toString).map(conf => p.getFileSystem(conf).open(p))).map { s =>
        streams.put(uri, s)
        s
      }
    }

    /** Up to `length` bytes at `offset` into `data`; fewer only where the file ends. */
    private def readAt(stream: FSDataInputStream, offset: Long, data: Array[Byte], length: Int): Int = {
      var n = 0
      var more = true
      while (more && n < length) {
        val got = stream.read(offset + n, data, n, length - n)
        if (got > 0) n += got else more = false
      }
      n
    }

    private def answer(outcome: Int, message: String): Unit =
      out.write(new PayloadWriter().u8(outcome).str(message).frame(Protocol.RESP_OK))

    private def error(code: Int, message: String): Unit =
      out.write(new PayloadWriter().u16(code).str(message).frame(Protocol.RESP_ERROR))
  }
}
