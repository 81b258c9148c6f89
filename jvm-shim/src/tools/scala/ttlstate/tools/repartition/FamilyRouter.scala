package ttlstate.tools.repartition

import java.nio.charset.StandardCharsets.UTF_8

import org.apache.spark.sql.catalyst.expressions.{BoundReference, Expression, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning
import org.apache.spark.sql.types.StructType
import ttlstate.client.Protocol

/** The new partition of each stored key of a store with column families (transformWithState's,
 *  served by ttlstate): the key's family is the name it starts with
 *  (`[u16 name length][name]`, store/column_families.py), the rest is Spark's encoding of the
 *  family's key row, decoded with the family's own key encoder (`decoders`, from the operator's
 *  schema file); the grouping key is found in that row by the family's `paths` entry (the
 *  ordinals of nested struct columns leading to it; empty: the whole row is the grouping key;
 *  None: the family must hold no key), and routed by Spark's `HashPartitioning` of the grouping
 *  key's columns, as the operator's input is. Python plans the paths
 *  (spark/repartition_families.py) from the families' schemas, refusing any it does not know. */
final class FamilyRouter(paths: Map[String, Option[Seq[Int]]],
    decoders: Map[String, (Array[Byte] => UnsafeRow, StructType)], numPartitions: Int, label: String) {
  private final class Family(decode: Array[Byte] => UnsafeRow, keySchema: StructType, path: Seq[Int]) {
    // The struct widths along the path, and the grouping key's schema at its end.
    private val (widths, grouping) = path.foldLeft((Vector.empty[Int], keySchema)) { case ((ws, schema), i) =>
      val inner = schema.fields(i).dataType.asInstanceOf[StructType]
      (ws :+ inner.length, inner)
    }
    private val columns: Seq[Expression] =
      grouping.fields.toSeq.zipWithIndex.map { case (f, i) => BoundReference(i, f.dataType, f.nullable) }
    private val byGroupingKey = HashPartitioning(columns, numPartitions).partitionIdExpression

    def partition(stored: Array[Byte]): Int = {
      val row = path.zip(widths).foldLeft(decode(stored)) { case (r, (i, width)) => r.getStruct(i, width) }
      byGroupingKey.eval(row).asInstanceOf[Int]
    }
  }

  private val families = scala.collection.mutable.Map.empty[String, Family]

  private def fail(why: String): Nothing =
    throw new IllegalStateException(s"$label: $why; the checkpoint is unchanged")

  private def familyOf(stored: Array[Byte]): String = {
    val width = Protocol.FAMILY_NAME_LENGTH_BYTES
    if (stored.length < width) fail(s"a key of ${stored.length} bytes names no column family")
    val length = (0 until width).foldLeft(0)((n, i) => (n << 8) | (stored(i) & 0xff))
    if (stored.length < width + length) fail(s"a key of ${stored.length} bytes names a column family of $length bytes")
    new String(stored, width, length, UTF_8)
  }

  def partition(stored: Array[Byte]): Int = {
    val name = familyOf(stored)
    val family = families.getOrElseUpdate(name, paths.get(name) match {
      case Some(Some(path)) => decoders.get(name) match {
        case Some((decode, schema)) => new Family(decode, schema, path)
        case None => fail(s"column family '$name' has no key encoder in the operator's schema file")
      }
      case Some(None) => fail(s"column family '$name' holds keys, but has no grouping key to route them by")
      case None => fail(s"column family '$name' is not in the operator's schema file")
    })
    family.partition(stored)
  }
}
