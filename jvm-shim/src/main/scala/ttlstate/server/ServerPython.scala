package ttlstate.server

import ttlstate.conf.ConfKeys

/** Which interpreter runs the state server: the `python` conf (`ttlstate.configure` sets it to
 *  the driver's PYSPARK_PYTHON, the interpreter PySpark gives the executors' Python workers),
 *  else this executor's PYSPARK_PYTHON, else, in local mode only (the executor is the driver's
 *  JVM), the driver's interpreter that `configure` put into `localModePython`, else python3. */
object ServerPython {
  def choose(confs: Map[String, String], pysparkPython: Option[String], localMode: Boolean): String = {
    def set(v: Option[String]) = v.map(_.trim).filter(_.nonEmpty)
    set(confs.get(ConfKeys.PYTHON)).orElse(set(pysparkPython))
      .orElse(if (localMode) set(confs.get(ConfKeys.LOCAL_MODE_PYTHON)) else None)
      .getOrElse("python3")
  }

  /** `java -cp ... ttlstate.spark.ServerPython PYTHON_CONF LOCAL_MODE_PYTHON_CONF PYSPARK_PYTHON
   *  local|cluster` ("-" = not set) prints the choice, for a test of the rule. */
  def main(args: Array[String]): Unit = {
    def arg(i: Int) = Option(args(i)).filter(_ != "-")
    val confs = Seq(ConfKeys.PYTHON -> arg(0), ConfKeys.LOCAL_MODE_PYTHON -> arg(1))
      .collect { case (k, Some(v)) => k -> v }.toMap
    println(choose(confs, arg(2), localMode = args(3) == "local"))
  }
}
