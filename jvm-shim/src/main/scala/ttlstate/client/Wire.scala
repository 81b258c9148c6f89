package ttlstate.client

import java.io.{DataInputStream, EOFException}
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets.UTF_8

import org.apache.spark.unsafe.Platform

/** A growable big-endian payload builder; `frame` prefixes length and code. */
final class PayloadWriter(initial: Int = 256) {
  private var buf = ByteBuffer.allocate(initial)

  private def ensure(n: Int): Unit = if (buf.remaining < n) {
    val bigger = ByteBuffer.allocate(math.max(buf.capacity * 2, buf.position() + n))
    buf.flip()
    bigger.put(buf)
    buf = bigger
  }

  def size: Int = buf.position()
  def reset(): PayloadWriter = { buf.clear(); this }
  def u8(v: Int): PayloadWriter = { ensure(1); buf.put(v.toByte); this }
  def u16(v: Int): PayloadWriter = { ensure(2); buf.putShort(v.toShort); this }
  def u32(v: Int): PayloadWriter = { ensure(4); buf.putInt(v); this }
  def i32(v: Int): PayloadWriter = u32(v)
  def i64(v: Long): PayloadWriter = { ensure(8); buf.putLong(v); this }
  def bytes(v: Array[Byte]): PayloadWriter = {
    if (v == null) i32(-1) else { ensure(4 + v.length); buf.putInt(v.length); buf.put(v) }
    this
  }
  def str(v: String): PayloadWriter = bytes(v.getBytes(UTF_8))

  /** `bytes` of `length` bytes at (`base`, `offset`), as Spark's `Platform` addresses them. */
  def bytes(base: AnyRef, offset: Long, length: Int): PayloadWriter = {
    ensure(4 + length)
    buf.putInt(length)
    Platform.copyMemory(base, offset, buf.array, Platform.BYTE_ARRAY_OFFSET.toLong + buf.arrayOffset + buf.position(),
      length.toLong)
    buf.position(buf.position() + length)
    this
  }

  /** `length` bytes of `v` from `offset`, as they are (no length prefix). */
  def raw(v: Array[Byte], offset: Int, length: Int): PayloadWriter = {
    ensure(length)
    buf.put(v, offset, length)
    this
  }

  /** Writes these bytes as they are (part of a frame whose head was written before). */
  def writeTo(out: java.io.OutputStream): Unit = out.write(buf.array, 0, buf.position())

  /** The whole frame (u32 length, u8 code, payload) in a fresh array. */
  def frame(code: Int): Array[Byte] = {
    val n = buf.position()
    val out = ByteBuffer.allocate(5 + n)
    out.putInt(n + 1).put(code.toByte).put(buf.array, 0, n)
    out.array
  }
}

/** Sequential decoder over a received payload. */
final class PayloadReader(val buf: ByteBuffer) {
  def u8(): Int = buf.get() & 0xff
  def u16(): Int = buf.getShort() & 0xffff
  def u32(): Int = buf.getInt()
  def i64(): Long = buf.getLong()
  def bytesOrNull(): Array[Byte] = {
    val n = buf.getInt()
    if (n < 0) null else { val a = new Array[Byte](n); buf.get(a); a }
  }
  def str(): String = new String(bytesOrNull(), UTF_8)
}

object Wire {
  /** Reads one frame: (code, payload). Throws EOFException when the server is gone. */
  def readFrame(in: DataInputStream): (Int, PayloadReader) = {
    val length = try in.readInt() catch {
      case e: EOFException => throw new EOFException("state server closed the connection")
    }
    if (length < 1 || length > Protocol.MAX_FRAME) {
      throw new IllegalStateException(s"ttlstate protocol error: bad frame length $length")
    }
    val code = in.readUnsignedByte()
    val payload = new Array[Byte](length - 1)
    in.readFully(payload)
    (code, new PayloadReader(ByteBuffer.wrap(payload)))
  }
}
