import java.io.BufferedReader;
import java.io.File;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.nodemanager.NodeManager;
import org.apache.hadoop.yarn.server.nodemanager.containermanager.container.Container;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.RMApp;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.attempt.RMAppAttempt;
import org.apache.hadoop.yarn.server.resourcemanager.rmapp.attempt.RMAppAttemptImpl;

/**
 * A Hadoop cluster for the cluster tier: Hadoop's MiniDFSCluster (one NameNode, two DataNodes)
 * and MiniYARNCluster (a ResourceManager and NODEMANAGERS NodeManagers, the physical-memory check
 * on, containers run as real processes by the DefaultContainerExecutor), in this JVM, all on
 * 127.0.0.1. It writes core-site.xml and yarn-site.xml into CONF_DIR, the HADOOP_CONF_DIR a
 * spark-submit --master yarn reads, then answers one command per stdin line with one stdout line
 * starting with "@@ ". EOF on stdin shuts it down.
 *
 * Usage: YarnCluster BASE_DIR CONF_DIR NODEMANAGERS NM_MEMORY_MB NM_VCORES
 */
public final class YarnCluster {
  private YarnCluster() {}

  public static void main(String[] args) {
    try {
      run(args);
    } catch (Throwable t) {
      t.printStackTrace();
      answer("ERROR " + t.toString().replace('\n', ' '));
      System.exit(1);  // the clusters' threads would keep the JVM up
    }
    System.exit(0);
  }

  private static void run(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: YarnCluster BASE_DIR CONF_DIR NODEMANAGERS NM_MEMORY_MB NM_VCORES");
      System.exit(2);
    }
    File base = new File(args[0]);
    File confDir = new File(args[1]);
    int nodeManagers = Integer.parseInt(args[2]);

    Configuration dfsConf = new HdfsConfiguration();
    dfsConf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(base, "dfs").getAbsolutePath());
    dfsConf.set("dfs.replication", "2");
    dfsConf.setLong("dfs.namenode.safemode.extension", 0L);
    dfsConf.setInt("dfs.heartbeat.interval", 1);
    dfsConf.setBoolean("dfs.permissions.enabled", false);
    // A disk shared with other test runs may look full for a moment: no safe mode for that.
    dfsConf.setLong("dfs.namenode.resource.du.reserved", 0L);
    MiniDFSCluster dfs = new MiniDFSCluster.Builder(dfsConf).numDataNodes(2).format(true).build();
    dfs.waitActive();
    String fsUrl = "hdfs://127.0.0.1:" + dfs.getNameNodePort();

    YarnConfiguration conf = new YarnConfiguration();
    conf.set("fs.defaultFS", fsUrl);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, true);  // as on a real cluster
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);  // as EMR and Dataproc
    conf.setInt(YarnConfiguration.NM_PMEM_MB, Integer.parseInt(args[3]));
    conf.setInt(YarnConfiguration.NM_VCORES, Integer.parseInt(args[4]));
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, Integer.parseInt(args[3]));
    // A lost NodeManager is seen within seconds, not the default ten minutes.
    conf.setLong(YarnConfiguration.RM_NM_EXPIRY_INTERVAL_MS, 4000L);
    conf.setInt(YarnConfiguration.RM_AM_MAX_ATTEMPTS, 2);
    // The CapacityScheduler (YARN's default) with one queue; an application master may take up
    // to half the cluster (the default 10% would admit one small AM on this small cluster).
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.set("yarn.scheduler.capacity.root.default.capacity", "100");
    conf.set("yarn.scheduler.capacity.root.default.maximum-capacity", "100");
    conf.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
    // A shared, nearly full disk must not make the NodeManagers refuse their local dirs.
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100.0f);
    conf.setLong(YarnConfiguration.NM_MIN_PER_DISK_FREE_SPACE_MB, 0L);
    conf.set(YarnConfiguration.NM_LOG_RETAIN_SECONDS, "3600");
    conf.setBoolean("yarn.log-aggregation-enable", false);
    conf.set(YarnConfiguration.RM_HOSTNAME, "127.0.0.1");
    conf.set(YarnConfiguration.NM_ADDRESS, "127.0.0.1:0");
    conf.set("yarn.nodemanager.hostname", "127.0.0.1");
    MiniYARNCluster yarn = new MiniYARNCluster("ttlstate", nodeManagers, 1, 1);
    yarn.init(conf);
    yarn.start();
    Configuration live = yarn.getConfig();
    long deadline = System.currentTimeMillis() + 60000;
    while (live.get(YarnConfiguration.RM_ADDRESS, "").endsWith(":0") && System.currentTimeMillis() < deadline) {
      Thread.sleep(100);  // start() may return before the RM put its port into the conf
    }
    for (int i = 0; i < nodeManagers; i++) {
      while (yarn.getNodeManager(i).getNMContext().getNodeId() == null
          || yarn.getNodeManager(i).getNMContext().getNodeId().getPort() == 0) {
        Thread.sleep(100);
      }
    }
    while (yarn.getResourceManager().getRMContext().getRMNodes().size() < nodeManagers
        && System.currentTimeMillis() < deadline) {
      Thread.sleep(100);
    }

    confDir.mkdirs();
    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", fsUrl);
    write(core, new File(confDir, "core-site.xml"));
    Configuration site = new Configuration(false);
    for (java.util.Map.Entry<String, String> e : live) {
      if (e.getKey().startsWith("yarn.")) site.set(e.getKey(), e.getValue());
    }
    site.set("fs.defaultFS", fsUrl);
    write(site, new File(confDir, "yarn-site.xml"));
    FileSystem fs = dfs.getFileSystem();
    answer("READY " + fsUrl + " " + live.get(YarnConfiguration.RM_WEBAPP_ADDRESS));

    boolean[] stopped = new boolean[nodeManagers];
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] cmd = line.trim().split("\\s+");
      try {
        switch (cmd[0]) {
          case "containers": {  // per NodeManager, its containers and their MB: "nm0=c1:896,c2:1760 nm1="
            StringBuilder out = new StringBuilder("OK");
            for (int i = 0; i < nodeManagers; i++) {
              List<String> ids = new ArrayList<>();
              if (!stopped[i]) {
                NodeManager nm = yarn.getNodeManager(i);
                for (Container c : nm.getNMContext().getContainers().values()) {
                  ids.add(c.getContainerId() + ":" + c.getResource().getMemorySize());
                }
              }
              out.append(" nm").append(i).append('=').append(String.join(",", ids));
            }
            answer(out.toString());
            break;
          }
          case "stop-nodemanager": {  // its containers are stopped as YARN stops them (SIGTERM, then SIGKILL)
            int i = Integer.parseInt(cmd[1]);
            yarn.getNodeManager(i).stop();
            stopped[i] = true;
            answer("OK");
            break;
          }
          case "attempts": {  // per application, oldest first, its attempts as the ResourceManager keeps them:
            // "app1=attempt:STATE:AM_CONTAINER:AM_EXIT_STATUS,... app2=..." (AM_CONTAINER "-" if none yet)
            StringBuilder out = new StringBuilder("OK");
            TreeMap<ApplicationId, RMApp> apps = new TreeMap<>(yarn.getResourceManager().getRMContext().getRMApps());
            for (RMApp app : apps.values()) {
              List<String> attempts = new ArrayList<>();
              for (RMAppAttempt a : new TreeMap<>(app.getAppAttempts()).values()) {
                attempts.add(a.getAppAttemptId() + ":" + a.getAppAttemptState() + ":"
                    + (a.getMasterContainer() == null ? "-" : a.getMasterContainer().getId()) + ":"
                    + ((RMAppAttemptImpl) a).getAMContainerExitStatus());
              }
              out.append(' ').append(app.getApplicationId()).append('=').append(String.join(",", attempts));
            }
            answer(out.toString());
            break;
          }
          case "exists":
            answer("OK " + fs.exists(new Path(cmd[1])));
            break;
          case "ls": {
            StringBuilder out = new StringBuilder("OK");
            Path p = new Path(cmd[1]);
            if (fs.exists(p)) for (FileStatus s : fs.listStatus(p)) out.append(' ').append(s.getPath().getName());
            answer(out.toString());
            break;
          }
          default:
            answer("ERROR unknown command '" + line.trim()
                + "'; allowed: containers, stop-nodemanager I, attempts, exists PATH, ls PATH");
        }
      } catch (Exception e) {
        answer("ERROR " + e.toString().replace('\n', ' '));
      }
    }
    yarn.stop();  // stops the NodeManagers' containers, if any still run; HDFS needs no clean end
  }

  private static void write(Configuration conf, File file) throws Exception {
    try (OutputStream out = new FileOutputStream(file)) {
      conf.writeXml(out);
    }
  }

  private static void answer(String text) {
    System.out.println("@@ " + text);
    System.out.flush();
  }
}
