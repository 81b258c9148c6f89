package ttlstate.spark

import java.io.{File, IOException}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.ipc.RemoteException
import org.scalatest.funsuite.AnyFunSuite

/** The checkpoint lock's own rules, without Spark: it never fails or blocks a query's start but
 *  for a tool holding it, wherever the checkpoint is, and leaves nothing open behind it. (Which
 *  runs share it is QueryLocks' part, tested with real queries in tests/spark/test_repartition.py.) */
class CheckpointLockSuite extends AnyFunSuite {
  private val conf = new Configuration()

  private def folder(): File = Files.createTempDirectory("ttlstate-lock").toFile

  private def lockFile(ck: File): File = new File(ck, CheckpointLock.FileName)

  test("a tool's lock refuses a query's start, naming the tool, until the tool is done") {
    val ck = new File(folder(), "ck").getPath
    assert(CheckpointLock.forTool(ck, "ttlstate repartition (a test)", conf) == null)
    val e = intercept[CheckpointLock.Locked](CheckpointLock.queryStarting(ck, "a query", conf))
    assert(e.getMessage.contains("TTLSTATE_CHECKPOINT_LOCKED") && e.getMessage.contains("ttlstate repartition (a test)"))
    assert(CheckpointLock.forTool(ck, "another tool", conf) == "is in use by ttlstate repartition (a test): wait until it ends")
    CheckpointLock.toolDone(ck, conf)
    CheckpointLock.queryStarting(ck, "a query", conf)
    assert(new String(Files.readAllBytes(lockFile(new File(ck)).toPath), UTF_8) == "query a query\n")
    CheckpointLock.settleAll() // no start in progress on this thread, no run: the lock goes
    assert(CheckpointLock.forTool(ck, "a tool", conf) == null)
    CheckpointLock.toolDone(ck, conf)
  }

  test("a checkpoint URI whose path has a space and a %: the lock is in that very folder") {
    val parent = folder()
    val ck = new File(parent, "a b%41/ck")
    CheckpointLock.queryStarting("file://" + ck.getPath, "a query", conf)
    assert(lockFile(ck).isFile && parent.list().toSeq == Seq("a b%41"))
    assert(CheckpointLock.forTool(ck.getPath, "a tool", conf) == null) // the same lock: the start was settled
    CheckpointLock.toolDone(ck.getPath, conf)
  }

  test("a query starts wherever the lock cannot be had; a tool is refused there, naming why") {
    val failing = new Configuration()
    failing.set("fs.defaultFS", "hdfs://127.0.0.1:1") // nothing listens
    failing.set("ipc.client.connect.max.retries", "0")
    failing.set("ipc.client.connect.max.retries.on.timeouts", "0")
    // File systems without locks: the tool's caller decides (`unlockableReason`); forTool refuses.
    for (ck <- Seq("s3a://bucket/ck", "gs://bucket/ck", "abfss://c@a.dfs.core.windows.net/ck")) {
      CheckpointLock.queryStarting(ck, "a query", conf) // never throws
      val scheme = ck.takeWhile(_ != ':')
      assert(CheckpointLock.unlockableReason(ck, conf) == s"checkpoints on '$scheme' file systems have no lock")
      assert(CheckpointLock.forTool(ck, "a tool", conf) == s"cannot be locked (checkpoints on '$scheme' file systems have no lock)")
      CheckpointLock.toolDone(ck, conf)
    }
    // File systems with locks where taking it fails (a place that cannot be written, an unreachable
    // HDFS): a query starts, a tool is refused (it would not see a query running there).
    for ((ck, c) <- Seq("file:/proc/self/ttlstate-ck" -> conf, "/no-such-scheme-config/ck" -> failing)) {
      CheckpointLock.queryStarting(ck, "a query", c) // never throws
      assert(CheckpointLock.unlockableReason(ck, c) == null, ck)
      val refusal = CheckpointLock.forTool(ck, "a tool", c)
      assert(refusal != null && refusal.startsWith("could not be locked (taking its lock file ") &&
        refusal.contains("_ttlstate_lock failed: ") && refusal.contains("nothing was changed"), refusal)
      CheckpointLock.toolDone(ck, c)
    }
    assert(CheckpointLock.unlockableReason(folder().getPath, conf) == null)
  }

  test("a lease another HDFS client holds is recognised as the NameNode's exception arrives") {
    val held = "org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException"
    val recovering = "org.apache.hadoop.hdfs.protocol.RecoveryInProgressException"
    for (name <- Seq(held, recovering)) {
      val remote = new RemoteException(name, "failed to append to /ck/_ttlstate_lock: this file lease is owned by ...")
      assert(CheckpointLock.leaseHeld(remote), name) // the client passes it on as a RemoteException
      assert(CheckpointLock.leaseHeld(new IOException("retried", remote)), name) // or wrapped
    }
    assert(!CheckpointLock.leaseHeld(new RemoteException("org.apache.hadoop.fs.FileAlreadyExistsException", "exists")))
    assert(!CheckpointLock.leaseHeld(new RemoteException("org.apache.hadoop.security.AccessControlException", "denied")))
    assert(!CheckpointLock.leaseHeld(new IOException("Connection refused")))
  }

  test("a thousand starts and ends leave no file descriptor and no thread behind") {
    val ck = new File(folder(), "ck").getPath
    def fds: Int = new File("/proc/self/fd").list().length
    CheckpointLock.queryStarting(ck, "a query", conf)
    CheckpointLock.settleAll()
    val (before, threads) = (fds, Thread.activeCount())
    for (_ <- 1 to 1000) {
      CheckpointLock.queryStarting(ck, "a query", conf)
      CheckpointLock.settleAll()
    }
    assert(fds == before && Thread.activeCount() <= threads)
    assert(new File(ck).list().toSeq == Seq(CheckpointLock.FileName))
  }
}
