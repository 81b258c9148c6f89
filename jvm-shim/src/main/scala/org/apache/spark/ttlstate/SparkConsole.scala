package org.apache.spark.ttlstate

import org.apache.logging.log4j.Level
import org.apache.spark.internal.Logging

/** Whether a log line at INFO reaches where this JVM's log goes. A shell or a local PySpark
 *  session runs with Spark's default log4j profile at INFO but filters its console to WARN
 *  ("Setting default log level to WARN"): `sparkShellThresholdLevel`, private to Spark's
 *  package, hence this bridge inside it. `sc.setLogLevel` clears or replaces that threshold. */
object SparkConsole {
  def showsInfo(infoEnabled: Boolean): Boolean = infoEnabled && {
    val threshold = Logging.sparkShellThresholdLevel
    threshold == null || Level.INFO.isMoreSpecificThan(threshold)
  }
}
