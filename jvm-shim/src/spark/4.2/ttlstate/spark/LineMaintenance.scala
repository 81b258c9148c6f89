package ttlstate.spark

import org.apache.spark.sql.execution.streaming.state.StateStoreProvider

/** Spark 4.2 calls `doMaintenance` only (snapshot, then cleanup). */
trait LineMaintenance extends StateStoreProvider
