package ttlstate.store

import java.nio.ByteBuffer

import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.StructType

/** How a key row becomes the bytes the state server stores.
 *
 *  No prefix: the key's UnsafeRow bytes. Prefix scan (session windows): the UnsafeRow of the
 *  first n columns is not a byte prefix of the full row, so the stored key is
 *  `[u32 length of prefix row][prefix row bytes][full key row bytes]` and a prefix scan is a
 *  range scan on `[length][prefix row]`. The full row is kept whole so decoding is a slice. */
sealed trait KeyCodec {
  def encode(key: UnsafeRow): Array[Byte]
  def decode(stored: Array[Byte]): UnsafeRow
  def scanPrefix(prefixKey: UnsafeRow): Array[Byte]
  /** Whether the encoded key is the key row's bytes as they are. */
  def plain: Boolean
}

object KeyCodec {
  /** `numColsPrefixKey` 0: no prefix scans (Spark's NoPrefix key encoder); n > 0: prefix scans on
   *  the key's first n columns (PrefixKeyScan, Spark 3.5's `numColsPrefixKey`). */
  def apply(numColsPrefixKey: Int, keySchema: StructType): KeyCodec =
    if (numColsPrefixKey > 0) new Prefixed(keySchema, numColsPrefixKey) else new Plain(keySchema.length)

  private[ttlstate] def rowBytes(row: UnsafeRow): Array[Byte] = row.getBytes

  final class Plain(numFields: Int) extends KeyCodec {
    def encode(key: UnsafeRow): Array[Byte] = rowBytes(key)
    def plain: Boolean = true
    def decode(stored: Array[Byte]): UnsafeRow = {
      val row = new UnsafeRow(numFields)
      row.pointTo(stored, stored.length)
      row
    }
    def scanPrefix(prefixKey: UnsafeRow): Array[Byte] = throw new UnsupportedOperationException(
      "prefixScan on a store without a PrefixKeyScan key encoder")
  }

  final class Prefixed(keySchema: StructType, numPrefixCols: Int) extends KeyCodec {
    private val prefixProjection = UnsafeProjection.create(
      keySchema.fields.take(numPrefixCols).zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) }.toSeq)

    private def withPrefix(prefixRow: Array[Byte], tail: Array[Byte]): Array[Byte] = {
      val out = ByteBuffer.allocate(4 + prefixRow.length + tail.length)
      out.putInt(prefixRow.length).put(prefixRow).put(tail)
      out.array
    }

    def encode(key: UnsafeRow): Array[Byte] = withPrefix(rowBytes(prefixProjection(key)), rowBytes(key))
    def plain: Boolean = false
    def decode(stored: Array[Byte]): UnsafeRow = {
      val prefixLen = ByteBuffer.wrap(stored, 0, 4).getInt
      val offset = 4 + prefixLen
      val full = java.util.Arrays.copyOfRange(stored, offset, stored.length)
      val row = new UnsafeRow(keySchema.length)
      row.pointTo(full, full.length)
      row
    }
    def scanPrefix(prefixKey: UnsafeRow): Array[Byte] = withPrefix(rowBytes(prefixKey), Array.emptyByteArray)
  }
}
