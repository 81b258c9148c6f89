package ttlstate.server

import java.nio.charset.StandardCharsets.US_ASCII
import java.nio.file.{Files, Path, Paths}

import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal
import ttlstate.client.ServerConnection

/** What /proc says about some processes: their CPU time (all threads) and each thread's state
 *  (R running, D in uninterruptible I/O, S sleeping, T stopped, Z zombie). It tells a slow state
 *  server (using CPU, or waiting for the disk) from a hung one (stopped, or idle while a request
 *  waits on it), without asking the server, which is exactly what cannot answer. */
private[ttlstate] final case class ProcSample(cpuTicks: Long, threadStates: Seq[Char]) {
  def stopped: Boolean = threadStates.nonEmpty && threadStates.forall(s => s == 'T' || s == 't')
  def working: Boolean = threadStates.exists(s => s == 'R' || s == 'D')
  def describe: String =
    if (stopped) "its process is stopped (state T: SIGSTOP, or a debugger)"
    else "its process used no CPU time and had no thread running or waiting for the disk"
}

private[ttlstate] object ProcSample {
  /** (state, utime + stime) of a /proc stat line. The command (field 2) is in parentheses and may
   *  hold anything, so fields are counted from the last ')': state is field 3, utime and stime
   *  fields 14 and 15. */
  private def parse(line: String): Option[(Char, Long)] = Try {
    val fields = line.substring(line.lastIndexOf(')') + 2).trim.split(' ')
    (fields(0).charAt(0), fields(11).toLong + fields(12).toLong)
  }.toOption

  private def read(path: Path): Option[String] = Try(new String(Files.readAllBytes(path), US_ASCII)).toOption

  private def threads(proc: Path): List[Path] = Try {
    val listing = Files.list(proc.resolve("task"))
    try listing.iterator().asScala.toList finally listing.close()
  }.getOrElse(Nil)

  /** One process (its CPU time covers all its threads); None once it is gone. */
  def of(pid: Long): Option[ProcSample] = {
    val proc = Paths.get("/proc", pid.toString)
    read(proc.resolve("stat")).flatMap(parse).map { case (_, cpu) =>
      ProcSample(cpu, threads(proc).flatMap(t => read(t.resolve("stat")).flatMap(parse)).map(_._1))
    }
  }

  /** The process exists and has not exited: a zombie (exited, not yet reaped by its parent) or
   *  one being torn down has. False also when /proc cannot tell. */
  def exists(pid: Long): Boolean =
    read(Paths.get("/proc", pid.toString, "stat")).flatMap(parse).exists { case (state, _) => !"ZXx".contains(state) }

  /** Several processes as one: working if any works, stopped if all are. */
  def ofAll(pids: Seq[Long]): Option[ProcSample] = {
    val samples = pids.flatMap(of)
    if (samples.isEmpty) None
    else Some(ProcSample(samples.map(_.cpuTicks).sum, samples.flatMap(_.threadStates)))
  }
}

/** How long something we wait on has shown no sign of work. Signs: what the caller saw (a frame,
 *  a checkpoint callback in progress) and, from /proc probes, CPU time used since the previous
 *  probe or a thread running or waiting for the disk. It is hung when a wait has gone on for the
 *  timeout since the last sign, and probes have seen it idle for at least half of that (so one
 *  late probe never decides alone). Used by one thread. */
private[ttlstate] final class Vigil(start: Long) {
  private val Unset = Long.MinValue
  private var lastSign = start
  private var idleSince = Unset // first probe that found no sign since the last sign
  private var cpu = -1L
  private var last: Option[ProcSample] = None

  def sign(at: Long): Unit = if (at - lastSign > 0) { lastSign = at; idleSince = Unset }

  def probe(sample: Option[ProcSample], now: Long): Unit = {
    val progressed = sample.exists(s => (cpu >= 0 && s.cpuTicks != cpu) || s.working)
    sample.foreach(s => cpu = s.cpuTicks)
    last = sample
    if (progressed) sign(now) else if (idleSince == Unset) idleSince = now
  }

  /** Nanoseconds a wait that began at `since` has gone without a sign. */
  def quiet(since: Long, now: Long): Long = now - math.max(since, lastSign)

  def hung(since: Long, timeout: Long, now: Long): Boolean =
    quiet(since, now) >= timeout && idleSince != Unset && now - idleSince >= timeout / 2

  /** Why it counts as hung, from the last probe. */
  def why: String = last.map(_.describe).getOrElse("its process could not be inspected (/proc)")
}

/** One thread per running server: watches the requests in flight on its connections and kills
 *  the server when a worker stops answering (`Vigil`). The blocked task thread then fails with
 *  the reason (`RunningServer.killedBecause`), Spark retries the task, and the retry starts a new
 *  server. A slow but working worker is waited for, however long. */
private[ttlstate] final class Watchdog(server: RunningServer) extends Runnable {
  private val vigils = scala.collection.mutable.Map[Int, Vigil]()
  private var framesSeen = Map.empty[ServerConnection, Long]

  // Until the server is torn down, not just until its supervisor exits: a worker stopped while
  // its supervisor died never reads its EOF, and a request may still wait on it.
  override def run(): Unit = while (!server.isDead) {
    val conns = server.connectionsNow
    val tickNanos = Watchdog.tickNanos(conns.map(_.timeoutNanos))
    Thread.sleep(tickNanos / 1000000L)
    try check(conns, System.nanoTime(), tickNanos)
    catch { case NonFatal(e) => StateServer.log.warn("ttlstate: state server watchdog check failed", e) }
  }

  private def check(conns: Seq[ServerConnection], now: Long, tickNanos: Long): Unit = {
    val frames = conns.map(c => c -> c.frames).toMap
    val waiting = conns.filter(_.waitingSince != ServerConnection.Idle).groupBy(_.worker)
    vigils.keys.toSeq.filterNot(waiting.contains).foreach(vigils.remove)
    waiting.foreach { case (worker, waiters) =>
      val vigil = vigils.getOrElseUpdate(worker, new Vigil(now))
      val ofWorker = conns.filter(_.worker == worker)
      if (ofWorker.exists(c => c.serving || framesSeen.get(c).exists(_ != frames(c)))) vigil.sign(now)
      val quiet = waiters.map(c => c -> c.waitingSince)
      if (quiet.exists { case (_, since) => vigil.quiet(since, now) >= tickNanos }) {
        vigil.probe(server.probe(worker), now)
        // (the same wait still: a request answered meanwhile proves nothing hung)
        quiet.collectFirst { case (c, since) if vigil.hung(since, c.timeoutNanos, now) && c.waitingSince == since => c }
          .foreach(c => server.killUnresponsive(worker, c.timeoutNanos, now - c.waitingSince, vigil.why))
      }
    }
    framesSeen = frames
  }
}

private[ttlstate] object Watchdog {
  /** A quarter of the shortest deadline, within [50 ms, 1 s]. */
  def tickNanos(timeouts: Seq[Long]): Long =
    math.min(1000000000L, math.max(50000000L, (if (timeouts.isEmpty) Long.MaxValue else timeouts.min) / 4))

  def millis(nanos: Long): String = {
    val ms = nanos / 1000000L
    if (ms % 1000 == 0) s"${ms / 1000}s" else f"${ms / 1000.0}%.1fs"
  }
}
