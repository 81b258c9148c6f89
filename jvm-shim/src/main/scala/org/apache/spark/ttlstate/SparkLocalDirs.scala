package org.apache.spark.ttlstate

import org.apache.spark.SparkConf
import org.apache.spark.util.Utils

/** Spark's configured local directories, in the order its block manager uses them: YARN's
 *  container dirs, SPARK_EXECUTOR_DIRS, SPARK_LOCAL_DIRS, then `spark.local.dir` (default
 *  java.io.tmpdir). `Utils` is private to Spark's package, hence this bridge inside it. */
object SparkLocalDirs {
  def configured(conf: SparkConf): Seq[String] = Utils.getConfiguredLocalDirs(conf).toSeq
}
