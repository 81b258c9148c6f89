package org.apache.spark.sql.ttlstatebridge

import java.util.UUID

import scala.util.Try

import org.apache.spark.SparkEnv
import org.apache.spark.sql.execution.streaming.state.{StateStoreCoordinatorRef, StateStoreId, StateStoreProviderId}

/** Spark 4.1+'s state store coordinator watches each store's snapshot uploads, logs the stores
 *  that lag and (with `forceSnapshotUploadOnLag`, 4.2+) asks a lagging one to snapshot at its
 *  next commit. Its report call is private to Spark's `sql` package, as Spark's own providers
 *  make it: this bridge makes it for ttlstate's snapshots. */
object SnapshotUploads {
  /** Reports that the store `id` of query run `runId` uploaded the snapshot of `version`; false
   *  when there is no coordinator to tell (no SparkEnv: a tool outside an application). */
  def report(id: StateStoreId, runId: UUID, version: Long): Boolean =
    Option(SparkEnv.get).exists { env =>
      Try(StateStoreCoordinatorRef.forExecutor(env))
        .map(_.snapshotUploaded(StateStoreProviderId(id, runId), version, System.currentTimeMillis()))
        .getOrElse(false)
    }
}
