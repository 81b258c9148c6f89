package org.apache.spark.ttlstate

import org.apache.spark.SparkContext

/** The running SparkContext of this JVM, if any, never a new one: `SparkContext.getOrCreate()`
 *  called from a task thread while the application stops would start a second context from the
 *  JVM's system properties, which a later session then silently reuses (its own static confs,
 *  such as spark.local.dir, ignored). `getActive` is private to Spark's package, hence this
 *  bridge inside it. */
object SparkActiveContext {
  def get: Option[SparkContext] = SparkContext.getActive
}
