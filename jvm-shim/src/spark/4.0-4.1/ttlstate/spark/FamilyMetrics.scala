package ttlstate.spark

/** Spark 4.0 and 4.1's RocksDB provider reports its internal column families' count as
 *  `rocksdbNumExternalColumnFamilies` and its user families' as `rocksdbNumInternalColumnFamilies`
 *  (4.2 reports each under its own name): ttlstate reports what the line's provider reports. */
private[spark] object FamilyMetrics {
  val countsSwapped: Boolean = true
}
