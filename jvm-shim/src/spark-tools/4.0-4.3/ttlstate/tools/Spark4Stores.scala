package ttlstate.tools

import java.util.UUID

import scala.util.Try

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType

/** What Spark 4's lines share in `ttlstate migrate`'s LineStores: providers made with a key encoder
 *  spec, and schema files holding a list of column families. */
object Spark4Stores {
  /** The default column family's key and value schemas of the schema file `read` reads for the
   *  store's partition 0 (the checker's constructor differs between lines). */
  def schemas(stateRoot: String, op: Long, name: String)(
      read: StateStoreProviderId => List[StateStoreColFamilySchema]): Option[(StructType, StructType)] =
    Try(read(StateStoreProviderId(StateStoreId(stateRoot, op, 0, name), UUID.randomUUID()))).toOption.flatMap { all =>
      all.find(_.colFamilyName == StateStore.DEFAULT_COL_FAMILY_NAME).orElse(all.headOption)
        .map(cf => (cf.keySchema, cf.valueSchema))
    }

  def provider(id: StateStoreId, keySchema: StructType, valueSchema: StructType, numColsPrefixKey: Int,
      conf: StateStoreConf, hadoopConf: Configuration): StateStoreProvider = {
    val encoder = if (numColsPrefixKey > 0) PrefixKeyScanStateEncoderSpec(keySchema, numColsPrefixKey)
      else NoPrefixKeyStateEncoderSpec(keySchema)
    StateStoreProvider.createAndInit(StateStoreProviderId(id, UUID.randomUUID()), keySchema, valueSchema, encoder,
      useColumnFamilies = false, conf, hadoopConf, useMultipleValuesPerKey = false, stateSchemaProvider = None)
  }
}
