package ttlstate.spark

import java.util.{Map => JMap}

import scala.util.control.NonFatal

import org.apache.spark.api.plugin.{ExecutorPlugin, PluginContext}
import org.slf4j.LoggerFactory
import ttlstate.conf.ConfKeys
import ttlstate.metadata.SparkMetadata
import ttlstate.server.ServerLaunch

/** The executor side of `spark.plugins=ttlstate.spark.StateServerPlugin` (which checks the Spark
 *  line first, in Java, then creates this): each executor starts its state server in the
 *  background as the executor starts, when the provider class is ttlstate's, instead of in its
 *  first state store task. The first batch after every start or restart of a query then does not
 *  wait for the interpreter and its workers to come up.
 *
 *  It reads the confs the executor started with (spark-defaults, `--conf`, the session builder),
 *  not ones set later on a running session. A start that fails is logged at WARN and changes
 *  nothing else: the first store starts the server as without the plugin, and fails with the
 *  full message if it cannot. */
class EarlyServerStart extends ExecutorPlugin {
  override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit = {
    val conf = ctx.conf()
    if (conf.get(SparkMetadata.ProviderKey, "") == StartChecks.ProviderClass) {
      val confs = conf.getAllWithPrefix(ConfKeys.PREFIX).map { case (k, v) => (ConfKeys.PREFIX + k) -> v }.toMap
      val launch = ServerLaunch.of(confs, Some(conf))  // the executor's SparkConf: spark.pyspark.python
      val starter = new Thread(() => EarlyServerStart.start(launch), "ttlstate-server-start")
      starter.setDaemon(true)
      starter.start()
    }
  }
}

object EarlyServerStart {
  private val log = LoggerFactory.getLogger("ttlstate.spark.StateServerPlugin")

  private def start(launch: ServerLaunch): Unit =
    try {
      val server = launch.server()
      log.info(s"ttlstate: state server pid ${server.pid} started with the executor")
    } catch {
      case NonFatal(e) =>
        log.warn(s"ttlstate: the state server did not start with the executor (${e.getMessage}); the " +
          "first state store will start it", e)
    }
}
