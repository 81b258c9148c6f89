package ttlstate.spark

/** Spark 4.2 and 4.3's RocksDB provider reports each count of column families under its own name
 *  (4.0 and 4.1 swap them). */
private[spark] object FamilyMetrics {
  val countsSwapped: Boolean = false
}
