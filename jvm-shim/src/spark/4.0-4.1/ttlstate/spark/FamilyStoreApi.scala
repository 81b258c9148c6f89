package ttlstate.spark

import org.apache.spark.sql.execution.streaming.state.StateStore

/** Spark 4.0 and 4.1 have no column family method beyond those every Spark 4 line has. */
trait FamilyStoreApi extends StateStore
