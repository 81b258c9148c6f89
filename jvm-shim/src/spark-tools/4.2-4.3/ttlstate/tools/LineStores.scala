package ttlstate.tools

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType

/** Spark 4.2's and 4.3's side of `ttlstate migrate` (Migration): operator metadata, the key encoder
 *  specs (Spark4Stores), and Spark's `loadEmpty`, so any provider is a target (ttlstate -> RocksDB
 *  too). */
object LineStores {
  type Session = SparkSession

  val writesOperatorMetadata: Boolean = true

  def schemas(stateRoot: String, op: Long, name: String, hadoopConf: Configuration): Option[(StructType, StructType)] =
    Spark4Stores.schemas(stateRoot, op, name)(
      new StateSchemaCompatibilityChecker(_, hadoopConf, Nil, None, false).readSchemaFile())

  def provider(id: StateStoreId, keySchema: StructType, valueSchema: StructType, numColsPrefixKey: Int,
      conf: StateStoreConf, hadoopConf: Configuration): StateStoreProvider =
    Spark4Stores.provider(id, keySchema, valueSchema, numColsPrefixKey, conf, hadoopConf)

  def readStore(provider: StateStoreProvider, version: Long): ReadStateStore = provider.getReadStore(version, None)

  /** A write store of `version` that starts empty (its commit writes `version` + 1). */
  def emptyWriteStore(provider: StateStoreProvider, version: Long): StateStore =
    provider.getStore(version, None, forceSnapshotOnCommit = true, loadEmpty = true)
}
