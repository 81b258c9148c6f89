package ttlstate.tools

import java.util.UUID

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType

/** Spark 3.5's side of `ttlstate migrate` (Migration): no operator metadata (the stores are read
 *  off the state directories), one schema file per store, `numColsPrefixKey` providers, and no
 *  `loadEmpty`: only ttlstate's provider writes a version from empty (its own load), so the
 *  target must be ttlstate. */
object LineStores {
  type Session = SparkSession

  val writesOperatorMetadata: Boolean = false

  /** The store's key and value schemas, from the schema file Spark 3.5 writes for partition 0
   *  (`<store>/_metadata/schema`), read with Spark's own reader of its format. */
  def schemas(stateRoot: String, op: Long, name: String, hadoopConf: Configuration): Option[(StructType, StructType)] =
    Try {
      val file = new Path(new Path(StateStoreId(stateRoot, op, 0, name).storeCheckpointLocation(), "_metadata"), "schema")
      val in = file.getFileSystem(hadoopConf).open(file)
      try SchemaHelper.SchemaReader.createSchemaReader(in.readUTF()).read(in) finally in.close()
    }.toOption

  def provider(id: StateStoreId, keySchema: StructType, valueSchema: StructType, numColsPrefixKey: Int,
      conf: StateStoreConf, hadoopConf: Configuration): StateStoreProvider =
    StateStoreProvider.createAndInit(StateStoreProviderId(id, UUID.randomUUID()), keySchema, valueSchema,
      numColsPrefixKey, conf, hadoopConf)

  def readStore(provider: StateStoreProvider, version: Long): ReadStateStore = provider.getReadStore(version)

  def emptyWriteStore(provider: StateStoreProvider, version: Long): StateStore = EmptyStores.ttlstate(provider, version)
}
