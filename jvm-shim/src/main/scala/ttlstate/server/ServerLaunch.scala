package ttlstate.server

import org.apache.spark.SparkEnv
import ttlstate.conf.ConfKeys
import ttlstate.conf.ConfValues

/** How this executor starts its state server, read from the ttlstate confs: the interpreter
 *  (see ServerPython), the number of workers and the request deadline, which also bounds the
 *  start. One reading for the provider and for StateServerPlugin. */
final case class ServerLaunch(python: String, workers: Int, timeoutNanos: Long) {
  /** The running server, started now if there is none. */
  def server(): RunningServer = StateServer.get(python, workers, timeoutNanos)
}

object ServerLaunch {
  def of(confs: Map[String, String]): ServerLaunch = {
    val python = ServerPython.choose(confs, Option(System.getenv("PYSPARK_PYTHON")),
      localMode = Option(SparkEnv.get).exists(_.executorId == "driver"))
    // A bad value fails the query at OPEN (the server validates every key); until then, the default
    // (so a server never starts with more workers than the key allows).
    val workers = ConfValues.get(ConfKeys.WORKERS, confs).toInt
    val timeoutMs = ConfValues.get(ConfKeys.REQUEST_TIMEOUT, confs)
    ServerLaunch(python, workers, timeoutMs * 1000000L)
  }
}
