package ttlstate.store

import java.nio.ByteBuffer

import org.apache.spark.sql.catalyst.expressions.{BoundReference, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.types.StructType
import ttlstate.client.Protocol

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
  /** What every key this codec encodes starts with: a scan of all its entries is a scan of this
   *  prefix (null: the whole store). */
  def scope: Array[Byte] = null
}

/** Spark's own encoding of a column family's key rows (its key encoder of the family's
 *  `KeyStateEncoderSpec`, which keeps range-scan keys in order), as `KeyCodec.InFamily` uses it. */
trait RowKeys {
  def encode(key: UnsafeRow): Array[Byte]
  def decode(encoded: Array[Byte]): UnsafeRow
  /** The bytes every encoded key with this prefix (or range-scan ordering columns) starts with. */
  def encodePrefix(prefixKey: UnsafeRow): Array[Byte]
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

  /** The prefix of every key of the column family `name`: its UTF-8 name's length (big-endian,
   *  `Protocol.FAMILY_NAME_LENGTH_BYTES` bytes), then the name (the layout the state server's
   *  store/column_families.py defines). Of two different names neither prefix starts the other,
   *  so each family is one contiguous run of the store's ordered keys. */
  def familyPrefix(name: String): Array[Byte] = {
    val utf8 = name.getBytes(java.nio.charset.StandardCharsets.UTF_8)
    if (utf8.length > Protocol.FAMILY_NAME_MAX_BYTES) throw new IllegalArgumentException(
      s"column family name of ${utf8.length} bytes: at most ${Protocol.FAMILY_NAME_MAX_BYTES}")
    val width = Protocol.FAMILY_NAME_LENGTH_BYTES
    val out = new Array[Byte](width + utf8.length)
    (0 until width).foreach(i => out(i) = (utf8.length >>> (8 * (width - 1 - i))).toByte)
    System.arraycopy(utf8, 0, out, width, utf8.length)
    out
  }

  /** A column family's keys: its prefix, then Spark's encoding of the key row (`RowKeys`). A
   *  prefix scan in the family, and a range of its ordered keys, stay contiguous runs. */
  final class InFamily(val name: String, keys: RowKeys) extends KeyCodec {
    override val scope: Array[Byte] = familyPrefix(name)
    private def within(encoded: Array[Byte]): Array[Byte] = {
      val out = java.util.Arrays.copyOf(scope, scope.length + encoded.length)
      System.arraycopy(encoded, 0, out, scope.length, encoded.length)
      out
    }
    def encode(key: UnsafeRow): Array[Byte] = within(keys.encode(key))
    def decode(stored: Array[Byte]): UnsafeRow = keys.decode(java.util.Arrays.copyOfRange(stored, scope.length, stored.length))
    def scanPrefix(prefixKey: UnsafeRow): Array[Byte] = within(keys.encodePrefix(prefixKey))
    def plain: Boolean = false
  }
}
