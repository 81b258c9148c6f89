package ttlstate.server

import org.scalatest.funsuite.AnyFunSuite

/** The supervisor's READY line names each worker as `<pid>@<socket>`: the forked workers'
 *  command lines are the supervisor's, so the pid is how the watchdog finds each one. */
class ReadyLineSuite extends AnyFunSuite {
  test("a live worker's pid and its socket, an @ in the path kept") {
    val me = ProcessHandle.current().pid()
    val (worker, socket) = StateServer.readyEntry(s"$me@/tmp/a@b/w0.sock")
    assert(worker.map(_.pid).contains(me) && socket == "/tmp/a@b/w0.sock")
  }

  test("no pid, or one of no process: the socket alone, the worker unknown") {
    assert(StateServer.readyEntry("/tmp/x/w1.sock") == ((None, "/tmp/x/w1.sock")))
    assert(StateServer.readyEntry("@/tmp/x/w1.sock") == ((None, "@/tmp/x/w1.sock")))
    val (gone, socket) = StateServer.readyEntry(s"${Long.MaxValue}@/tmp/x/w2.sock")
    assert(gone.isEmpty && socket == "/tmp/x/w2.sock")
  }

  test("a start failure names the server's own reason, or asks whether ttlstate is installed") {
    val own = StateServer.startFailure("/usr/bin/python3", "FAILED worker 1 failed to start (exit 1)", Some(1))
    assert(own.contains("(interpreter '/usr/bin/python3', exit 1): worker 1 failed to start (exit 1).") &&
      !own.contains("Is ttlstate installed"))
    for (line <- Seq(null, "", "Traceback (most recent call last):")) {
      val none = StateServer.startFailure("/usr/bin/python3", line, None)
      assert(none.contains("exit n/a") && none.contains("Is ttlstate installed for that interpreter?"), none)
    }
  }
}
