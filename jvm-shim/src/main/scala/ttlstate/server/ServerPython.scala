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
}
