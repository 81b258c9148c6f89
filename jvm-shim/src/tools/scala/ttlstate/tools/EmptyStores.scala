package ttlstate.tools

import org.apache.spark.sql.execution.streaming.state.{StateStore, StateStoreProvider}
import ttlstate.spark.TtlStateStoreProvider

/** `ttlstate migrate` on the Spark lines without `loadEmpty` (3.5 to 4.1: their LineStores): only
 *  ttlstate's provider can write a version starting from empty (its own load), so it is the one
 *  target there (`ttlstate.spark.migrate` refuses another before the job starts). */
object EmptyStores {
  /** A write store of `version` of ttlstate's `provider` that starts empty (commit: `version` + 1). */
  def ttlstate(provider: StateStoreProvider, version: Long): StateStore = provider match {
    case t: TtlStateStoreProvider => t.emptyStore(version)
    case other => Migration.fail(s"${other.getClass.getName} cannot write a version starting from empty on " +
      s"Spark ${org.apache.spark.SPARK_VERSION} (its loadEmpty is new in 4.2)")
  }
}
