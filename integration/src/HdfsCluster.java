import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * A real HDFS for the integration tests: Hadoop's MiniDFSCluster (one NameNode, N DataNodes,
 * all on 127.0.0.1) in this JVM, steered by one command per line on stdin so a test can restart
 * or stop the NameNode and stop or restart DataNodes between or during batches. The NameNode
 * keeps its RPC port across restarts, so hdfs://127.0.0.1:PORT stays valid. Each answer is one
 * stdout line starting with "@@ " (anything else on stdout is not ours). EOF on stdin (the test
 * process exited) shuts the cluster down.
 *
 * Usage: HdfsCluster BASE_DIR NAMENODE_PORT DATANODES REPLICATION
 */
public final class HdfsCluster {
  private HdfsCluster() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: HdfsCluster BASE_DIR NAMENODE_PORT DATANODES REPLICATION");
      System.exit(2);
    }
    Configuration conf = new HdfsConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, args[0]);
    conf.set("dfs.replication", args[3]);
    conf.setLong("dfs.namenode.safemode.extension", 0L);  // leave safe mode as soon as blocks are in
    conf.setInt("dfs.heartbeat.interval", 1);
    conf.setInt("dfs.namenode.heartbeat.recheck-interval", 2000);  // a stopped DataNode is seen dead soon
    conf.setBoolean("dfs.permissions.enabled", false);
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(Integer.parseInt(args[1]))
        .numDataNodes(Integer.parseInt(args[2]))
        .format(true)
        .build();
    cluster.waitActive();
    answer("READY hdfs://127.0.0.1:" + cluster.getNameNodePort());

    Deque<MiniDFSCluster.DataNodeProperties> stopped = new ArrayDeque<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    String line;
    while ((line = in.readLine()) != null) {
      String[] cmd = line.trim().split("\\s+");
      try {
        switch (cmd[0]) {
          case "stop-namenode":
            cluster.shutdownNameNode(0);
            answer("OK");
            break;
          case "start-namenode":
            cluster.restartNameNode(0, true);
            cluster.waitActive();
            answer("OK");
            break;
          case "restart-namenode":
            cluster.restartNameNode(true);
            cluster.waitActive();
            answer("OK");
            break;
          case "stop-datanode":
            stopped.push(cluster.stopDataNode(Integer.parseInt(cmd[1])));
            answer("OK");
            break;
          case "start-datanode":
            if (stopped.isEmpty()) {
              answer("ERROR no stopped DataNode to start");
            } else {
              cluster.restartDataNode(stopped.pop(), true);
              cluster.waitActive();
              answer("OK");
            }
            break;
          case "datanodes":
            answer("OK " + cluster.getDataNodes().size());
            break;
          default:
            answer("ERROR unknown command '" + line.trim()
                + "'; allowed: stop-namenode, start-namenode, restart-namenode, stop-datanode I,"
                + " start-datanode, datanodes");
        }
      } catch (Exception e) {
        answer("ERROR " + e.toString().replace('\n', ' '));
      }
    }
    cluster.shutdown();
  }

  private static void answer(String text) {
    System.out.println("@@ " + text);
    System.out.flush();
  }
}
