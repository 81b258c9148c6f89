package ttlstate.server

import java.io.File
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.{Files, Paths}

import scala.util.Try

import ttlstate.conf.ConfKeys

/** Which interpreter runs Python for ttlstate, by PySpark's own conventions, so that the setup
 *  PySpark documents (a `--archives` venv with `spark.pyspark.python`, or `PYSPARK_PYTHON`) needs
 *  no line of ttlstate's. */
object ServerPython {
  val SparkPython = "spark.pyspark.python"
  val SparkDriverPython = "spark.pyspark.driver.python"

  /** The end of every message about an interpreter that did not run. */
  val howToSet: String = s"Give the executors an interpreter with ttlstate installed as PySpark's own Python " +
    s"workers get theirs: $SparkPython (e.g. ./environment/bin/python with --archives venv.tar.gz#environment) " +
    s"or PYSPARK_PYTHON; ${ConfKeys.PYTHON} sets it for the state server only."

  private def set(v: Option[String]) = v.map(_.trim).filter(_.nonEmpty)

  /** The state server's interpreter on an executor: the `python` conf (`ttlstate.configure` sets
   *  it to the driver's PYSPARK_PYTHON, the interpreter PySpark gives the executors' Python
   *  workers), else `spark.pyspark.python` (what spark-submit gives them; on YARN a relative
   *  `./environment/bin/python` of an `--archives` venv, resolved in the container), else this
   *  executor's PYSPARK_PYTHON, else, in local mode only (the executor is the driver's JVM), the
   *  driver's interpreter (`localModePython`, which `configure` records, then `driver`), else
   *  python3. */
  def choose(confs: Map[String, String], sparkPython: Option[String], pysparkPython: Option[String],
      localMode: Boolean, driver: => Option[String] = None): String =
    set(confs.get(ConfKeys.PYTHON)).orElse(set(sparkPython)).orElse(set(pysparkPython))
      .orElse(if (localMode) set(confs.get(ConfKeys.LOCAL_MODE_PYTHON)).orElse(set(driver)) else None)
      .getOrElse("python3")

  /** Where PySpark's driver interpreter is to be found, in the order the candidates are tried. */
  final case class DriverHints(sparkDriverPython: Option[String], driverPythonEnv: Option[String],
      localModePython: Option[String], parentProcess: Option[String], sparkPython: Option[String],
      pysparkPythonEnv: Option[String], ttlstatePython: Option[String])

  /** The interpreter the driver really runs, for the checks at query start: `spark.pyspark.driver.python`,
   *  PYSPARK_DRIVER_PYTHON, the `localModePython` that `configure` recorded (the driver's
   *  `sys.executable`), the Python process that launched this JVM (`python job.py`), then what
   *  spark-submit's PythonRunner falls back to (`spark.pyspark.python`, PYSPARK_PYTHON) and the
   *  server's `python` conf. Only one that runs here counts: a path must name an executable file
   *  (so a YARN archive's relative `./environment/bin/python` counts in cluster mode, where the
   *  driver runs in the container that has it, and not in client mode); a bare name is looked up
   *  on the PATH when it runs. A driver launcher that is not an interpreter (PYSPARK_DRIVER_PYTHON
   *  =jupyter or ipython) does not count: its name must start with "python". */
  def forDriver(h: DriverHints, runsHere: String => Boolean = runsHere): String =
    Seq(h.sparkDriverPython, h.driverPythonEnv, h.localModePython, h.parentProcess, h.sparkPython,
      h.pysparkPythonEnv, h.ttlstatePython).flatMap(set(_))
      .find(p => new File(p).getName.startsWith("python") && runsHere(p)).getOrElse("python3")

  /** A bare name (looked up on the PATH), or a path to an executable file from this JVM's
   *  working directory. */
  def runsHere(python: String): Boolean =
    if (!python.contains(File.separator)) true
    else { val f = new File(python); f.isFile && f.canExecute }

  /** The interpreter of this JVM's parent process if it is a Python: the driver of `python
   *  job.py` (or a notebook kernel), which launched this JVM through spark-submit. Its argv[0]
   *  as it ran it (from /proc; a relative path resolved in its working directory), not its
   *  executable, which for a venv's python is the base interpreter the venv links to. */
  def parentPython(): Option[String] = Try {
    val ppid = ProcessHandle.current().parent().get.pid
    val argv0 = new String(Files.readAllBytes(Paths.get(s"/proc/$ppid/cmdline")), UTF_8).takeWhile(_ != '\u0000')
    if (!new File(argv0).getName.startsWith("python")) None
    else if (!argv0.contains(File.separator) || new File(argv0).isAbsolute) Some(argv0)
    else Some(Files.readSymbolicLink(Paths.get(s"/proc/$ppid/cwd")).resolve(argv0).normalize.toString)
  }.toOption.flatten
}
