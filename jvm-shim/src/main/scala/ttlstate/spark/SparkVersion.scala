package ttlstate.spark

/** A shim jar serves the one Spark line it was compiled for: `LineCheck` (Java, so that it runs
 *  on Scala 2.12 and 2.13 alike) checks the running Spark and names the jar to use instead. Every
 *  entry point checks first: the Java entry classes Spark loads by name, and the provider. */
object SparkVersion {
  /** "4.2.1" -> "4.2"; a vendor's suffix ("3.5.0-amzn-1") is ignored. */
  def minorOf(version: String): String = LineCheck.minorOf(version)

  /** Why this jar cannot serve Spark `running` (on the running Scala), if it cannot. */
  def mismatch(running: String): Option[String] = Option(LineCheck.mismatch(running, LineCheck.runningScala()))

  /** Fails at once, naming the right jar, when this jar is not the running Spark's. */
  def check(): Unit = LineCheck.check()
}
