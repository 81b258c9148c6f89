package ttlstate.client

import java.io.{DataInputStream, InputStream, OutputStream}
import java.lang.management.{BufferPoolMXBean, ManagementFactory}
import java.net.{StandardProtocolFamily, UnixDomainSocketAddress}
import java.nio.ByteBuffer
import java.nio.channels.{Channels, ServerSocketChannel, SocketChannel}
import java.nio.file.Files

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

/** The connection's streams move large payloads intact without leaving the thread a direct
 *  buffer as large as the payload (the JDK's cache of temporary direct buffers, per thread,
 *  freed only when the thread ends: Spark's task threads live on): checked against the JDK's
 *  own channel streams, which do leave one. */
class SlicedChannelStreamsSuite extends AnyFunSuite {
  private val Payload = 4 << 20
  private val bytes = Array.tabulate[Byte](Payload)(i => (i * 31 + i / 7).toByte)
  // The other end's buffers, direct (no temporary copies) and allocated once: a direct buffer
  // freed by the GC while a test counts would move the count.
  private val peerBuffer = ByteBuffer.allocateDirect(Payload)
  private def directPool: BufferPoolMXBean =
    ManagementFactory.getPlatformMXBeans(classOf[BufferPoolMXBean]).asScala.find(_.getName == "direct").get

  /** A connected pair of UNIX socket channels. */
  private def pair(): (SocketChannel, SocketChannel) = {
    val dir = Files.createTempDirectory("ttlstate-sliced")
    val address = UnixDomainSocketAddress.of(dir.resolve("s"))
    val server = ServerSocketChannel.open(StandardProtocolFamily.UNIX).bind(address)
    val client = SocketChannel.open(StandardProtocolFamily.UNIX)
    client.connect(address)
    val accepted = server.accept()
    server.close()
    Files.deleteIfExists(dir.resolve("s"))
    Files.delete(dir)
    (client, accepted)
  }

  /** Runs `body` on a new thread (an empty temporary-buffer cache); the direct memory it still
   *  held when `body` returned, before the thread ended. */
  private def directBytesKeptBy(body: => Unit): Long = {
    var kept = 0L
    var failure: Throwable = null
    val t = new Thread(() =>
      try {
        val before = directPool.getMemoryUsed
        body
        kept = directPool.getMemoryUsed - before
      } catch { case e: Throwable => failure = e })
    t.start()
    t.join()
    if (failure != null) throw failure
    kept
  }

  /** Sends the payload through `out` while the other end drains it into a direct buffer. */
  private def sent(open: SocketChannel => OutputStream): (Long, Array[Byte]) = {
    val (client, peer) = pair()
    val received = peerBuffer.clear()
    val reader = new Thread(() => while (received.hasRemaining && peer.read(received) >= 0) {})
    reader.start()
    val kept = directBytesKeptBy { val out = open(client); out.write(bytes); out.flush() }
    reader.join()
    client.close(); peer.close()
    val got = new Array[Byte](Payload)
    received.flip().get(got)
    (kept, got)
  }

  /** Receives the payload through `in`, sent from a direct buffer by the other end. */
  private def received(open: SocketChannel => InputStream): (Long, Array[Byte]) = {
    val (client, peer) = pair()
    val source = peerBuffer.clear().put(bytes).flip()
    val writer = new Thread(() => while (source.hasRemaining) peer.write(source))
    writer.start()
    val got = new Array[Byte](Payload)
    val kept = directBytesKeptBy(new DataInputStream(open(client)).readFully(got))
    writer.join()
    client.close(); peer.close()
    (kept, got)
  }

  private val cases: Seq[(String, () => (Long, Array[Byte]), () => (Long, Array[Byte]))] = Seq(
    ("write", () => sent(SlicedChannelStreams.output), () => sent(c => Channels.newOutputStream(c))),
    ("read", () => received(SlicedChannelStreams.input), () => received(c => Channels.newInputStream(c))))

  for ((what, sliced, jdk) <- cases) {
    test(s"a large $what arrives intact and leaves its thread at most one slice of direct memory") {
      val (kept, got) = sliced()
      assert(got.sameElements(bytes))
      assert(kept <= SlicedChannelStreams.Slice, s"kept $kept bytes")
      val (jdkKept, _) = jdk()
      assert(jdkKept >= Payload, s"the JDK's stream kept $jdkKept bytes: the premise of this test")
    }
  }

  test("single bytes and an ended stream") {
    val (client, peer) = pair()
    val out = SlicedChannelStreams.output(client)
    out.write(7)
    out.write(200)
    client.shutdownOutput()
    val in = SlicedChannelStreams.input(peer)
    assert(in.read() == 7 && in.read() == 200 && in.read() == -1)
    assert(in.read(new Array[Byte](4), 0, 4) == -1)
    client.close(); peer.close()
  }
}
