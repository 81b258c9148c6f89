package ttlstate.tools.repartition

import org.apache.hadoop.fs.FSDataInputStream
import org.apache.spark.sql.execution.streaming.state.SchemaHelper
import org.apache.spark.sql.types.StructType

/** A store's key and value schemas from the schema file Spark keeps in its folder, read with
 *  Spark's own reader (on 3.5 it returns the pair). */
object SchemaFile {
  def parse(in: FSDataInputStream): Option[(StructType, StructType)] =
    Some(SchemaHelper.SchemaReader.createSchemaReader(in.readUTF()).read(in))
}
