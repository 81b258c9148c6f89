package ttlstate.client

import java.io.{InputStream, OutputStream}
import java.nio.ByteBuffer
import java.nio.channels.SocketChannel
import java.util.Objects

/** Streams over a blocking socket channel that read and write at most `Slice` bytes per call.
 *
 *  The JDK reads or writes a heap array through a temporary direct buffer the size of the call,
 *  and keeps it for the thread's next call (`jdk.nio.maxCachedBufferSize` is unlimited unless the
 *  user sets it). With `Channels.newInputStream`/`newOutputStream`, every Spark task thread that
 *  once read a large answer (a store's key filter: megabytes) or sent a large frame kept that
 *  much native memory for good; sliced, a thread keeps at most `Slice`. */
private[client] object SlicedChannelStreams {
  val Slice: Int = 1 << 16

  def output(channel: SocketChannel): OutputStream = new OutputStream {
    override def write(b: Int): Unit = write(Array(b.toByte), 0, 1)

    override def write(b: Array[Byte], off: Int, len: Int): Unit = {
      Objects.checkFromIndexSize(off, len, b.length)
      val end = off + len
      var pos = off
      while (pos < end) {
        val slice = ByteBuffer.wrap(b, pos, math.min(end - pos, Slice))
        while (slice.hasRemaining) channel.write(slice)
        pos = slice.position()
      }
    }
  }

  def input(channel: SocketChannel): InputStream = new InputStream {
    override def read(): Int = {
      val one = new Array[Byte](1)
      var n = 0
      while (n == 0) n = read(one, 0, 1)
      if (n < 0) -1 else one(0) & 0xff
    }

    override def read(b: Array[Byte], off: Int, len: Int): Int = {
      Objects.checkFromIndexSize(off, len, b.length)
      if (len == 0) 0 else channel.read(ByteBuffer.wrap(b, off, math.min(len, Slice)))
    }
  }
}
