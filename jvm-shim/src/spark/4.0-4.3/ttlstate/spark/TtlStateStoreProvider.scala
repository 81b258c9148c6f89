package ttlstate.spark

import org.apache.hadoop.conf.Configuration
import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.sql.execution.streaming.state._
import org.apache.spark.sql.types.StructType
import org.apache.spark.ttlstatebridge.NextIteratorBridge
import ttlstate.client.Protocol
import ttlstate.store.{ChangeFeed, KeyCodec, LoadRequest, ProviderCore, StoreSpec}

/** Spark's entry point on Spark 4: its provider contract mapped onto `ProviderCore`, which does
 *  the work (every store operation goes to the executor's ttlstate state server). `ProviderApi`
 *  holds the methods whose signatures differ between 4.0 and 4.3.
 *
 *  The constructor does nothing: Spark creates throwaway instances on the driver just to read
 *  `supportedCustomMetrics`, so no process may start before `init`/`getStore`. */
class TtlStateStoreProvider extends StateStoreProvider with SupportsFineGrainedReplay with ProviderApi {
  private var core: ProviderCore = _
  private[spark] var families: ColumnFamilies = _
  private[spark] val tasks = new TaskStores[TtlStateStore](_.session)

  override def init(
      stateStoreId: StateStoreId,
      keySchema: StructType,
      valueSchema: StructType,
      keyStateEncoderSpec: KeyStateEncoderSpec,
      useColumnFamilies: Boolean,
      storeConfs: StateStoreConf,
      hadoopConf: Configuration,
      useMultipleValuesPerKey: Boolean,
      stateSchemaProvider: Option[StateSchemaProvider]): Unit = {
    SparkVersion.check()
    families = if (useColumnFamilies) new ColumnFamilies(ColumnFamilies.family(StateStore.DEFAULT_COL_FAMILY_NAME,
      keySchema, valueSchema, keyStateEncoderSpec, useMultipleValuesPerKey, internal = false))
    else {
      if (useMultipleValuesPerKey) throw StateStoreErrors.unsupportedOperationException(
        "multiple values per key without column families", "TtlStateStoreProvider")
      val prefixCols = keyStateEncoderSpec match {
        case _: NoPrefixKeyStateEncoderSpec => 0
        case p: PrefixKeyScanStateEncoderSpec => p.numColsPrefixKey
        case other => throw new UnsupportedOperationException(
          s"ttlstate supports NoPrefix and PrefixKeyScan key encoders, not ${other.getClass.getSimpleName}")
      }
      ColumnFamilies.single(KeyCodec(prefixCols, keySchema), valueSchema)
    }
    val codec = families(StateStore.DEFAULT_COL_FAMILY_NAME).layout.codec
    core = new ProviderCore(StoreSpec(stateStoreId, keySchema, valueSchema, codec,
      storeConfs.sqlConfs, hadoopConf, checkpointIds = storeConfs.enableStateStoreCheckpointIds,
      minVersionsToRetain = storeConfs.minVersionsToRetain, commitValidation = SparkLine.commitValidation(storeConfs),
      snapshotPublished = SparkLine.snapshotUploaded(stateStoreId, storeConfs, hadoopConf),
      columnFamilies = useColumnFamilies))
  }

  /** A column family Spark names for this store (transformWithState's stores only). */
  private[spark] def createFamily(name: String, keySchema: StructType, valueSchema: StructType,
      spec: KeyStateEncoderSpec, multiValues: Boolean, internal: Boolean): Unit = {
    if (!core.spec.columnFamilies) throw StateStoreErrors.unsupportedOperationException(
      s"column family '$name' in a store opened without column families", "TtlStateStoreProvider")
    families.register(ColumnFamilies.family(name, keySchema, valueSchema, spec, multiValues, internal))
  }

  override def stateStoreId: StateStoreId = core.id

  /** Loads a version; the store is registered for the read-ahead of its task (and, on Spark 4.0,
   *  as the task's store: `TaskStores`). */
  private[spark] def open(req: LoadRequest): TtlStateStore = {
    val store = new TtlStateStore(core.load(req), this)
    ReadAhead.opened(store.session)
    if (SparkLine.sharesTaskStores) tasks.opened(store) else store
  }

  /** A write store of `version` that starts empty, whatever the checkpoint holds: Spark 4.2's
   *  loadEmpty, for `ttlstate migrate` on the lines that lack it (4.0, 4.1: its tools jar). */
  private[ttlstate] def emptyStore(version: Long): StateStore =
    open(LoadRequest(version, readOnly = false, empty = true))

  /** `m` with the counts of this provider's column families, reported as Spark's RocksDB provider
   *  of this line reports them (`FamilyMetrics`); a store without families reports none. */
  private[spark] def withFamilyCounts(m: StateStoreMetrics): StateStoreMetrics =
    if (!core.spec.columnFamilies) m
    else {
      val (user, internal) = families.counts
      val (external, internalName) = if (FamilyMetrics.countsSwapped) (internal, user) else (user, internal)
      val counts = Map(MetricNames.EXTERNAL_FAMILIES -> external, MetricNames.INTERNAL_FAMILIES -> internalName)
      m.copy(customMetrics = m.customMetrics.map { case (metric, v) => metric -> counts.getOrElse(metric.name, v) })
    }

  /** After a store of this provider committed `version`. */
  private[spark] def committed(version: Long): Unit =
    if (core.spec.commitValidation) SparkLine.reportCommit(version, core.id, core.spec.hadoopConf)

  /** The read store itself when it is still open at `version`, else a new write store. */
  private[spark] def upgrade(readStore: ReadStateStore, version: Long, uniqueId: Option[String]): StateStore = readStore match {
    case s: TtlStateStore if s.version == version && s.session.isOpen => s.upgrade()
    case _ => open(LoadRequest(version, readOnly = false, uniqueId))
  }

  // -- SupportsFineGrainedReplay: the state data source's snapshotStartBatchId and readChangeFeed

  private[spark] def replay(snapshotVersion: Long, endVersion: Long, readOnly: Boolean, snapshotId: Option[String],
      endId: Option[String]): TtlStateStore =
    open(LoadRequest(endVersion, readOnly, endId, fromSnapshot = Some(snapshotVersion), snapshotCkptId = snapshotId))

  /** Spark's change feed iterator over `core.changes`: on a store with column families, the
   *  changes of the family Spark names (the state data source registered it first), which the
   *  state server picks out of the changelogs; a ListState's appends as Spark's MERGE_RECORD
   *  (`append`), as its RocksDB provider reports them. */
  private[spark] def changeFeed(startVersion: Long, endVersion: Long, colFamilyNameOpt: Option[String],
      endId: Option[String]): NextIteratorBridge[(RecordType.Value, UnsafeRow, UnsafeRow, Long)] = {
    val (family, multiValues) = if (core.spec.columnFamilies) {
      val f = families(colFamilyNameOpt.getOrElse(StateStore.DEFAULT_COL_FAMILY_NAME))
      (Some((f.name, f.layout)), f.multiValues)
    } else {
      colFamilyNameOpt.filter(_ != StateStore.DEFAULT_COL_FAMILY_NAME).foreach { cf =>
        throw StateStoreErrors.unsupportedOperationException(s"column family $cf", "TtlStateStoreProvider")
      }
      (None, false)
    }
    val feed: ChangeFeed = core.changes(startVersion, endVersion, endId, family, multiValues)
    new NextIteratorBridge[(RecordType.Value, UnsafeRow, UnsafeRow, Long)] {
      override protected def getNext(): (RecordType.Value, UnsafeRow, UnsafeRow, Long) = feed.next() match {
        case null => end(); null
        case c if c.kind == Protocol.CHANGE_DELETE => (RecordType.DELETE_RECORD, c.key, null, c.batchId)
        case c if c.kind == Protocol.CHANGE_APPEND => (RecordType.MERGE_RECORD, c.key, c.value, c.batchId)
        case c => (RecordType.PUT_RECORD, c.key, c.value, c.batchId)
      }
      override protected def close(): Unit = feed.close()
    }
  }

  private[spark] def forceSnapshot(): Unit = core.forceSnapshot()
  private[spark] def snapshotMaintenance(): Unit = if (core != null) core.snapshotMaintenance()
  private[spark] def cleanupMaintenance(): Unit = if (core != null) core.cleanupMaintenance()

  override def doMaintenance(): Unit = {
    snapshotMaintenance()
    cleanupMaintenance()
  }

  override def close(): Unit = if (core != null) core.close()

  override def supportedCustomMetrics: Seq[StateStoreCustomMetric] = Metrics.all
}
