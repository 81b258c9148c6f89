package ttlstate.spark

/** A shim jar serves the one Spark line it was compiled for (Spark's state store API changes
 *  between minors, and a jar on another line fails later with a bare NoSuchMethodError or
 *  AbstractMethodError). Every entry point checks the running Spark first and names the jar to
 *  use instead. */
object SparkVersion {
  /** "4.2.1" -> "4.2"; a vendor's suffix ("3.5.0-amzn-1") is ignored. */
  def minorOf(version: String): String = {
    val parts = version.trim.split("[.-]")
    if (parts.length >= 2) s"${parts(0)}.${parts(1)}" else version
  }

  /** Why this jar cannot serve Spark `running`, if it cannot. */
  def mismatch(running: String): Option[String] = {
    val minor = minorOf(running)
    if (minor == BuiltFor.Minor) None
    else Some(BuiltFor.Jars.find(_._1 == minor) match {
      case Some((_, jar)) =>
        s"This ttlstate shim jar is built for Spark ${BuiltFor.Minor}, but this is Spark $running: put $jar " +
          s"on spark.jars instead (`ttlstate jar --spark $minor` prints its path; ttlstate.configure() picks it)."
      case None =>
        s"ttlstate has no shim for Spark $running: it supports Spark ${BuiltFor.Jars.map(_._1).mkString(", ")} " +
          "(one jar per line)."
    })
  }

  private lazy val failure = mismatch(org.apache.spark.SPARK_VERSION)

  /** Fails at once, naming the right jar, when this jar is not the running Spark's. */
  def check(): Unit = failure.foreach(m => throw new IllegalStateException(s"[TTLSTATE_WRONG_SPARK] $m"))
}
