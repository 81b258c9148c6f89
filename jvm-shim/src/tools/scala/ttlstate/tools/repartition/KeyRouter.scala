package ttlstate.tools.repartition

import java.nio.ByteBuffer

import org.apache.spark.sql.catalyst.expressions.{BoundReference, Expression, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.types.StructType
import org.apache.spark.unsafe.Platform

/** The new partition of each stored key of one store: Spark's own `HashPartitioning` of the
 *  route's columns into `numPartitions` (the expression Spark's shuffle evaluates before a
 *  stateful operator: Murmur3 of the columns, seed 42, modulo the partition count), evaluated
 *  on the key row as ttlstate stores it (the shim's KeyCodec: the key's UnsafeRow, or
 *  `[u32 length][prefix row][key row]` for prefix scans). */
final class KeyRouter(keySchema: StructType, route: Route, numPartitions: Int, label: String) {
  private val width = keySchema.length
  private val keyRow = new UnsafeRow(width)
  private lazy val byKey = partitionOf(width)
  private lazy val byAllButLast = partitionOf(width - 1)
  private lazy val prefixColumns = route match {
    case Route.Prefix(n) => n
    case _ => width - 1
  }
  private lazy val byPrefix = partitionOf(prefixColumns)
  private lazy val prefixOfKey = UnsafeProjection.create(columns(prefixColumns))
  private var autoPrefixed: Option[Boolean] = None

  private def columns(n: Int): List[Expression] =
    keySchema.fields.take(n).toList.zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) }

  private def partitionOf(n: Int): Expression = HashPartitioning(columns(n), numPartitions).partitionIdExpression

  private def fail(why: String): Nothing =
    throw new IllegalStateException(s"$label: $why; the checkpoint is unchanged")

  /** Where `stored` goes. */
  def partition(stored: Array[Byte]): Int = route match {
    case Route.Single => 0
    case Route.WholeKey => whole(stored)
    case Route.DropLast => keyRow.pointTo(stored, stored.length); byAllButLast.eval(keyRow).asInstanceOf[Int]
    case Route.Prefix(_) => prefixed(stored)
    case Route.Auto =>
      val hasPrefix = stored.length % 8 == 4
      if (autoPrefixed.exists(_ != hasPrefix)) fail("its keys are stored in two layouts (with and without a prefix row)")
      autoPrefixed = Some(hasPrefix)
      if (hasPrefix) prefixed(stored) else whole(stored)
    case Route.Families => fail("a store with column families is routed by its families (FamilyRouter)")
  }

  private def whole(stored: Array[Byte]): Int = {
    keyRow.pointTo(stored, stored.length)
    byKey.eval(keyRow).asInstanceOf[Int]
  }

  /** A key stored after its prefix row: the prefix row's partition, once it is checked to be the
   *  projection of the key's first columns (a key of another layout would be routed wrong: it
   *  fails instead). */
  private def prefixed(stored: Array[Byte]): Int = {
    if (stored.length < 4) fail(s"a key of ${stored.length} bytes has no prefix row")
    val prefixLength = ByteBuffer.wrap(stored, 0, 4).getInt
    val keyAt = 4 + prefixLength
    if (prefixLength < 0 || keyAt > stored.length) fail("a key's prefix row is longer than the key")
    keyRow.pointTo(stored, Platform.BYTE_ARRAY_OFFSET + keyAt, stored.length - keyAt)
    val prefix = prefixOfKey(keyRow)
    if (prefix.getSizeInBytes != prefixLength ||
        !java.util.Arrays.equals(prefix.getBytes, java.util.Arrays.copyOfRange(stored, 4, keyAt))) {
      fail(s"a key's prefix row is not its first $prefixColumns columns")
    }
    byPrefix.eval(prefix).asInstanceOf[Int]
  }
}
