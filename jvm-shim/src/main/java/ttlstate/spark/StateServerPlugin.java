package ttlstate.spark;

import java.util.Map;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.api.plugin.SparkPlugin;

/** `spark.plugins=ttlstate.spark.StateServerPlugin` (`ttlstate.configure` sets it): checks the Spark
 *  line as the driver starts (the SparkContext fails, naming the right jar) and as each executor
 *  starts, then starts the executor's state server early (EarlyServerStart, Scala). Java, so that
 *  a jar of another line fails here naming the right jar on Scala 2.12 and 2.13 alike. */
public final class StateServerPlugin implements SparkPlugin {
  @Override
  public DriverPlugin driverPlugin() {
    LineCheck.check();
    return null;
  }

  @Override
  public ExecutorPlugin executorPlugin() {
    return new ExecutorPlugin() {
      @Override
      public void init(PluginContext ctx, Map<String, String> extraConf) {
        ExecutorPlugin start = LineCheck.instance("ttlstate.spark.EarlyServerStart");
        start.init(ctx, extraConf);
      }
    };
  }
}
