package ttlstate.tools.repartition

import org.apache.hadoop.fs.FSDataInputStream
import org.apache.spark.sql.execution.streaming.state.{SchemaHelper, StateStore}
import org.apache.spark.sql.types.StructType

/** A store's key and value schemas from the schema file Spark keeps in its folder, read with
 *  Spark's own reader (since 4.0 a list of column families, of which an operator without them
 *  has the default one). */
object SchemaFile {
  def parse(in: FSDataInputStream): Option[(StructType, StructType)] = {
    val families = SchemaHelper.SchemaReader.createSchemaReader(in.readUTF()).read(in)
    families.find(_.colFamilyName == StateStore.DEFAULT_COL_FAMILY_NAME).orElse(families.headOption)
      .map(f => (f.keySchema, f.valueSchema))
  }
}
