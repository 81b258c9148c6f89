package ttlstate.client

import java.io.{BufferedInputStream, DataInputStream, EOFException, File, IOException}
import java.net.{StandardProtocolFamily, URI, UnixDomainSocketAddress}
import java.nio.channels.SocketChannel
import java.nio.file.Files
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.atomic.AtomicInteger

import scala.util.Random

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataInputStream, FSInputStream, FileUtil, Path, RawLocalFileSystem}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/** The range service: byte ranges of the files under a registered checkpoint folder, read through
 *  Hadoop for the state server's RocksDB (RANGE_READ in python/ttlstate/server/protocol.py). */
class RangeServiceSuite extends AnyFunSuite with BeforeAndAfterAll {
  private val dir = Files.createTempDirectory("ttlstate-range").toFile
  private val data = Array.tabulate[Byte](10000)(_ => Random.nextInt(256).toByte)
  Files.write(new File(dir, "1-a.sst").toPath, data)
  private val outside = Files.createTempDirectory("ttlstate-other").toFile
  Files.write(new File(outside, "secret.sst").toPath, data)
  private val socket = RangeService.socketFor(new Path("file:" + dir), new Configuration())
  private val uri = s"file:$dir/1-a.sst"

  override def afterAll(): Unit = Seq(dir, outside).foreach(FileUtil.fullyDelete)

  /** A client connection, greeted. */
  private final class Client {
    val channel: SocketChannel = SocketChannel.open(StandardProtocolFamily.UNIX)
    channel.connect(UnixDomainSocketAddress.of(socket))
    private val in = new DataInputStream(new BufferedInputStream(SlicedChannelStreams.input(channel)))
    private val out = SlicedChannelStreams.output(channel)

    def call(code: Int, w: PayloadWriter): (Int, PayloadReader) = {
      out.write(w.frame(code))
      Wire.readFrame(in)
    }
    def hello(magic: Int = Protocol.MAGIC): (Int, PayloadReader) =
      call(Protocol.OP_HELLO, new PayloadWriter().u32(magic).u32(Protocol.PROTOCOL_VERSION))
    def read(file: String, offset: Long, length: Int): (Int, PayloadReader) =
      call(Protocol.RANGE_READ, new PayloadWriter().str(file).i64(offset).u32(length))
    def bytes(file: String, offset: Long, length: Int): Seq[Byte] = {
      val (code, r) = read(file, offset, length)
      assert(code == Protocol.RESP_OK, if (code == Protocol.RESP_ERROR) { r.u16(); r.str() } else code)
      assert(r.u8() == Protocol.RANGE_DATA)
      r.bytesOrNull().toSeq
    }
    def error(file: String, offset: Long = 0, length: Int = 10): (Int, String) = {
      val (code, r) = read(file, offset, length)
      assert(code == Protocol.RESP_ERROR)
      (r.u16(), r.str())
    }
    def closedByService: Boolean = try { Wire.readFrame(in); false } catch { case _: EOFException => true }
    def close(): Unit = channel.close()
  }

  private def greeted(): Client = {
    val c = new Client
    val (code, r) = c.hello()
    assert(code == Protocol.RESP_OK && r.u32() == Protocol.PROTOCOL_VERSION)
    c
  }

  test("the socket is in a folder only this user may enter") {
    val perms = Files.getPosixFilePermissions(new File(socket).getParentFile.toPath)
    assert(PosixFilePermissions.toString(perms) == "rwx------")
    assert(RangeService.socketFor(new Path("file:" + outside, "x"), new Configuration()) == socket, "one per JVM")
  }

  test("a range inside the file, one crossing its end (short) and one past it (empty)") {
    val c = greeted()
    try {
      val (requests, served) = (RangeService.requests.get, RangeService.bytesServed.get)
      assert(c.bytes(uri, 1234, 4000) == data.slice(1234, 5234).toSeq)
      assert(c.bytes(uri, 9000, 4096) == data.slice(9000, 10000).toSeq)
      assert(c.bytes(uri, 10000, 100).isEmpty)
      assert(c.bytes(uri, 50000, 100).isEmpty)
      assert(c.bytes(uri, 0, 0).isEmpty)
      // Larger than the buffer a connection keeps; and the file in another spelling of its URI.
      assert(c.bytes(uri, 0, 2 << 20) == data.toSeq)
      assert(c.bytes(s"file://$dir/1-a.sst", 10, 5) == data.slice(10, 15).toSeq)
      assert(RangeService.requests.get - requests >= 7)
      assert(RangeService.bytesServed.get - served >= 4000 + 1000 + 10000)
    } finally c.close()
  }

  test("a missing file is answered as missing; the connection goes on") {
    val c = greeted()
    try {
      val (code, r) = c.read(s"file:$dir/9-missing.sst", 0, 10)
      assert(code == Protocol.RESP_OK && r.u8() == Protocol.RANGE_MISSING && r.bytesOrNull().isEmpty)
      assert(c.bytes(uri, 0, 3) == data.take(3).toSeq)
    } finally c.close()
  }

  test("a file outside every registered folder is refused, also through ..") {
    val c = greeted()
    try {
      for (file <- Seq(s"file:$outside/secret.sst", s"file:$dir/../${outside.getName}/secret.sst", "")) {
        val (code, message) = c.error(file)
        assert(code == Protocol.ERR_BAD_REQUEST, message)
        assert(message.contains(s"$file is not under a checkpoint folder of a store reading in place"), message)
      }
      val (code, message) = c.error(uri, -1, 10)
      assert(code == Protocol.ERR_BAD_REQUEST && message.contains(uri), message)
      assert(c.bytes(uri, 5, 5) == data.slice(5, 10).toSeq)
    } finally c.close()
  }

  test("a failed read names the file, offset and length, and the next read opens the file again") {
    val conf = new Configuration()
    conf.set("fs.failing.impl", classOf[FailingFs].getName)
    RangeService.socketFor(new Path(s"failing:$outside"), conf)
    val c = greeted()
    try {
      val file = s"failing:$outside/secret.sst"
      assert(c.bytes(file, 0, 10) == data.take(10).toSeq)
      val opens = FailingFs.opens.get
      val (code, message) = c.error(file, FailingFs.FailFrom, 10)
      assert(code == Protocol.ERR_CHECKPOINT)
      assert(message.contains(s"reading checkpoint file $file at offset ${FailingFs.FailFrom}, length 10 failed"), message)
      assert(c.bytes(file, 10, 10) == data.slice(10, 20).toSeq)
      assert(FailingFs.opens.get == opens + 1)
    } finally c.close()
  }

  test("bytes the file system's own checksums reject are answered as corrupt, naming the file") {
    // Written through Hadoop's local file system, which keeps a .crc beside it; then changed.
    val fs = new Path("file:" + dir).getFileSystem(new Configuration())
    val file = new Path(s"file:$dir/2-checked.sst")
    val written = fs.create(file)
    try written.write(data) finally written.close()
    val raw = new File(dir, "2-checked.sst")
    val changed = data.clone()
    changed(5000) = (changed(5000) ^ 1).toByte
    Files.write(raw.toPath, changed)
    val c = greeted()
    try {
      val (code, r) = c.read(file.toString, 4096, 2048)
      assert(code == Protocol.RESP_OK && r.u8() == Protocol.RANGE_CORRUPT)
      assert(r.str().contains(file.toString))
      assert(c.bytes(file.toString, 0, 10) == data.take(10).toSeq) // a block the .crc accepts
    } finally c.close()
  }

  test("two connections at once, each served by its own thread") {
    val (a, b) = (greeted(), greeted())
    try {
      assert(b.bytes(uri, 100, 10) == data.slice(100, 110).toSeq)
      assert(a.bytes(uri, 200, 10) == data.slice(200, 210).toSeq)
      b.close()
      assert(a.bytes(uri, 300, 10) == data.slice(300, 310).toSeq)
    } finally { a.close(); b.close() }
  }

  test("a wrong magic, or an unknown request, is answered with an error and the connection closed") {
    val c = new Client
    try {
      val (code, r) = c.hello(magic = 0x12345678)
      assert(code == Protocol.RESP_ERROR && r.u16() == Protocol.ERR_PROTOCOL_VERSION)
      assert(r.str().contains("protocol"))
      assert(c.closedByService)
    } finally c.close()
    val d = greeted()
    try {
      val (code, r) = d.call(Protocol.OP_GET, new PayloadWriter().u32(1))
      assert(code == Protocol.RESP_ERROR && r.u16() == Protocol.ERR_BAD_REQUEST)
      assert(d.closedByService)
    } finally d.close()
  }

  test("checkpoint calls (work outside requests): a registered folder's files written, listed, read " +
      "and deleted as a request's callbacks would; another folder refused") {
    val c = greeted()
    val local = Files.createTempFile("ttlstate-publish", ".bin")
    try {
      def callback(folder: String, kind: Int, args: PayloadWriter => PayloadWriter = w => w) =
        c.call(Protocol.CHECKPOINT_CALL, args(new PayloadWriter().str(folder).u8(kind)))
      val folder = s"file:$dir"
      Files.write(local, data.take(100))
      assert(callback(folder, Protocol.CB_PUBLISH, _.str(local.toString).str("2-b.sst"))._1 == Protocol.CB_RESULT_OK)
      assert(Files.readAllBytes(new File(dir, "2-b.sst").toPath).toSeq == data.take(100).toSeq)
      val (listed, names) = callback(folder, Protocol.CB_LIST)
      assert(listed == Protocol.CB_RESULT_OK)
      val listedNames = (0 until names.u32()).map(_ => names.str()).filterNot(_.startsWith("."))
      assert(Set("1-a.sst", "2-b.sst").subsetOf(listedNames.toSet), listedNames)
      Files.delete(local)
      assert(callback(folder, Protocol.CB_FETCH, _.str("2-b.sst").str(local.toString))._1 == Protocol.CB_RESULT_OK)
      assert(Files.readAllBytes(local).toSeq == data.take(100).toSeq)
      assert(callback(folder, Protocol.CB_DELETE, _.u32(1).str("2-b.sst"))._1 == Protocol.CB_RESULT_OK)
      assert(!new File(dir, "2-b.sst").exists)
      val (missing, why) = callback(folder, Protocol.CB_FETCH, _.str("2-b.sst").str(local.toString))
      assert(missing == Protocol.CB_RESULT_ERROR && why.u8() == Protocol.CB_ERR_NOT_FOUND)
      val (refused, r) = callback(s"file:$outside", Protocol.CB_LIST)
      assert(refused == Protocol.RESP_ERROR && r.u16() == Protocol.ERR_BAD_REQUEST)
      assert(r.str().contains(outside.toString))
      assert(c.bytes(uri, 0, 10) == data.take(10).toSeq, "the connection serves on")
    } finally {
      c.close()
      Files.deleteIfExists(local)
    }
  }
}

/** Hadoop's local file system under the scheme `failing:`, whose reads at FailFrom or later fail. */
class FailingFs extends RawLocalFileSystem {
  override def getUri: URI = URI.create("failing:///")

  override def open(f: Path, bufferSize: Int): FSDataInputStream = {
    FailingFs.opens.incrementAndGet()
    val file = super.open(f, bufferSize)
    new FSDataInputStream(new FSInputStream {
      override def read(position: Long, b: Array[Byte], off: Int, len: Int): Int =
        if (position >= FailingFs.FailFrom) throw new IOException("the disk went away") else file.read(position, b, off, len)
      override def read(): Int = file.read()
      override def seek(pos: Long): Unit = file.seek(pos)
      override def getPos: Long = file.getPos
      override def seekToNewSource(targetPos: Long): Boolean = false
      override def close(): Unit = file.close()
    })
  }
}

object FailingFs {
  val FailFrom = 5000L
  val opens = new AtomicInteger()
}
