package ttlstate.tools.repartition

import org.apache.hadoop.fs.FSDataInputStream
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state.SchemaHelper
import org.apache.spark.sql.types.StructType

/** A store's key and value schemas from the schema file Spark keeps in its folder, read with
 *  Spark's own reader (on 3.5 it returns the pair). Spark 3.5 has no transformWithState, so no
 *  store has column families. */
object SchemaFile {
  def parse(in: FSDataInputStream): Option[(StructType, StructType)] =
    Some(SchemaHelper.SchemaReader.createSchemaReader(in.readUTF()).read(in))

  def familiesJson(in: FSDataInputStream): Seq[String] = Nil

  def decoders(in: FSDataInputStream): Map[String, (Array[Byte] => UnsafeRow, StructType)] = Map.empty
}
