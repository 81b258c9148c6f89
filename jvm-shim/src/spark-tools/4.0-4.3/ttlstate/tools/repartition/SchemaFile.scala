package ttlstate.tools.repartition

import org.apache.hadoop.fs.FSDataInputStream
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.{KeyStateEncoderSpec, NoPrefixKeyStateEncoderSpec,
  PrefixKeyScanStateEncoderSpec, RangeKeyScanStateEncoderSpec, SchemaHelper, StateStore}
import org.apache.spark.sql.types.StructType
import ttlstate.client.Json
import ttlstate.spark.ColumnFamilies

/** A store's key and value schemas from the schema file Spark keeps in its folder, read with
 *  Spark's own reader (since 4.0 a list of column families, of which an operator without them
 *  has the default one); and a transformWithState store's column families from its schema file
 *  (`_stateSchema/...`, which its operator metadata names). */
object SchemaFile {
  private def families(in: FSDataInputStream) = SchemaHelper.SchemaReader.createSchemaReader(in.readUTF()).read(in)

  def parse(in: FSDataInputStream): Option[(StructType, StructType)] = {
    val all = families(in)
    all.find(_.colFamilyName == StateStore.DEFAULT_COL_FAMILY_NAME).orElse(all.headOption)
      .map(f => (f.keySchema, f.valueSchema))
  }

  private def encoderJson(spec: Option[KeyStateEncoderSpec]): String = spec match {
    case Some(_: NoPrefixKeyStateEncoderSpec) => Json.str("noPrefix")
    case Some(p: PrefixKeyScanStateEncoderSpec) => Json.str(s"prefixScan:${p.numColsPrefixKey}")
    case Some(r: RangeKeyScanStateEncoderSpec) => Json.str(s"rangeScan:${r.orderingOrdinals.mkString(",")}")
    case _ => "null"
  }

  /** Each column family of the schema file as JSON: its name, key schema and key encoder. */
  def familiesJson(in: FSDataInputStream): Seq[String] = families(in).map { f =>
    Json.obj(Seq("name" -> Json.str(f.colFamilyName), "keySchema" -> Json.str(f.keySchema.json),
      "encoder" -> encoderJson(f.keyStateEncoderSpec)))
  }

  /** Each column family's decoder of stored keys (the family's name, then Spark's encoding of the
   *  key by its encoder spec, as ttlstate's store keeps it), and its key schema. */
  def decoders(in: FSDataInputStream): Map[String, (Array[Byte] => UnsafeRow, StructType)] =
    families(in).flatMap { f =>
      f.keyStateEncoderSpec.map { spec =>
        val codec = ColumnFamilies.family(f.colFamilyName, f.keySchema, f.valueSchema, spec, multiValues = false,
          internal = false).layout.codec
        f.colFamilyName -> ((stored: Array[Byte]) => codec.decode(stored), f.keySchema)
      }
    }.toMap
}
