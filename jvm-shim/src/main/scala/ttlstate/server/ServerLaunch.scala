package ttlstate.server

import org.apache.spark.{SparkConf, SparkEnv}
import ttlstate.conf.ConfKeys
import ttlstate.conf.ConfValues

/** How this executor starts its state server, read from the ttlstate confs and the executor's
 *  SparkConf: the interpreter (see ServerPython), the number of workers and the request
 *  deadline, which also bounds the start. One reading for the provider and for StateServerPlugin. */
final case class ServerLaunch(python: String, workers: Int, timeoutNanos: Long) {
  /** The running server, started now if there is none. */
  def server(): RunningServer = StateServer.get(python, workers, timeoutNanos)
}

object ServerLaunch {
  def of(confs: Map[String, String], sparkConf: Option[SparkConf] = Option(SparkEnv.get).map(_.conf)): ServerLaunch = {
    val localMode = Option(SparkEnv.get).exists(_.executorId == "driver")
    val python = ServerPython.choose(confs, sparkConf.flatMap(_.getOption(ServerPython.SparkPython)),
      Option(System.getenv("PYSPARK_PYTHON")), localMode, driver = Some(driverPython(confs, sparkConf)))
    // A bad value fails the query at OPEN (the server validates every key); until then, the default
    // (so a server never starts with more workers than the key allows).
    val workers = ConfValues.get(ConfKeys.WORKERS, confs).toInt
    val timeoutMs = ConfValues.get(ConfKeys.REQUEST_TIMEOUT, confs)
    ServerLaunch(python, workers, timeoutMs * 1000000L)
  }

  /** The driver's interpreter as this JVM (the driver's) sees it: see ServerPython.forDriver. */
  def driverPython(confs: Map[String, String], sparkConf: Option[SparkConf]): String = {
    def spark(key: String) = sparkConf.flatMap(_.getOption(key))
    ServerPython.forDriver(ServerPython.DriverHints(
      sparkDriverPython = spark(ServerPython.SparkDriverPython),
      driverPythonEnv = Option(System.getenv("PYSPARK_DRIVER_PYTHON")),
      localModePython = confs.get(ConfKeys.LOCAL_MODE_PYTHON).orElse(spark(ConfKeys.LOCAL_MODE_PYTHON)),
      parentProcess = ServerPython.parentPython(),
      sparkPython = spark(ServerPython.SparkPython),
      pysparkPythonEnv = Option(System.getenv("PYSPARK_PYTHON")),
      ttlstatePython = confs.get(ConfKeys.PYTHON).orElse(spark(ConfKeys.PYTHON))))
  }
}
