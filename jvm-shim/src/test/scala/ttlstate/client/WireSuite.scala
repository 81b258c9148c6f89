package ttlstate.client

import java.io.{ByteArrayInputStream, DataInputStream, EOFException}
import java.nio.ByteBuffer

import org.scalatest.funsuite.AnyFunSuite

/** The shim's codec of the frames in python/ttlstate/server/protocol.py: u32 length (code and
 *  payload), u8 code, then big-endian primitives; bytes are an i32 length (-1: null) and data. */
class WireSuite extends AnyFunSuite {
  private def stream(bytes: Array[Byte]) = new DataInputStream(new ByteArrayInputStream(bytes))

  test("a frame round-trips every primitive, null bytes and UTF-8 strings") {
    val w = new PayloadWriter(4) // grows from a tiny buffer
    w.u8(200).u16(65000).u32(-2).i64(Long.MinValue).bytes(null).bytes(Array[Byte](1, 2, 3)).str("zé")
    val (code, r) = Wire.readFrame(stream(w.frame(Protocol.OP_GET)))
    assert(code == Protocol.OP_GET)
    assert(r.u8() == 200 && r.u16() == 65000 && r.u32() == -2 && r.i64() == Long.MinValue)
    assert(r.bytesOrNull() == null)
    assert(r.bytesOrNull().toSeq == Seq[Byte](1, 2, 3))
    assert(r.str() == "zé")
    assert(!r.buf.hasRemaining)
  }

  test("the layout is big-endian with the length counting code and payload") {
    val frame = new PayloadWriter().u32(0x01020304).frame(7)
    assert(frame.toSeq == Seq[Byte](0, 0, 0, 5, 7, 1, 2, 3, 4))
  }

  test("a bad frame length is a protocol error, an ended stream an EOF") {
    val tooLong = ByteBuffer.allocate(5).putInt(Protocol.MAX_FRAME + 1).put(1.toByte).array
    assert(intercept[IllegalStateException](Wire.readFrame(stream(tooLong))).getMessage.contains("bad frame length"))
    val empty = ByteBuffer.allocate(5).putInt(0).put(1.toByte).array
    intercept[IllegalStateException](Wire.readFrame(stream(empty)))
    assert(intercept[EOFException](Wire.readFrame(stream(Array.emptyByteArray))).getMessage.contains("closed"))
  }

  test("reset reuses the writer for a new payload") {
    val w = new PayloadWriter().u32(1)
    assert(w.reset().u8(9).frame(1).toSeq == Seq[Byte](0, 0, 0, 2, 1, 9))
  }
}
