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
}
