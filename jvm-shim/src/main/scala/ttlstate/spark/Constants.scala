package ttlstate.spark

import ttlstate.client.Json
import ttlstate.client.Protocol
import ttlstate.conf.ConfKeys

/** `java -cp <jar>:<spark jars> ttlstate.spark.Constants` prints the shim's constants as JSON,
 *  so a Python test can check them against Python's single definitions. */
object Constants {
  def main(args: Array[String]): Unit = {
    val protocol = Protocol.all.map { case (k, v) => s"${Json.str(k)}:$v" }.mkString("{", ",", "}")
    val keys = ConfKeys.SUFFIXES.map(Json.str).mkString("[", ",", "]")
    val metrics = Metrics.kinds.map { case (n, k) => s"${Json.str(n)}:${Json.str(k)}" }.mkString("{", ",", "}")
    println(s"""{"protocol":$protocol,"confPrefix":${Json.str(ConfKeys.PREFIX)},"confSuffixes":$keys,"metrics":$metrics}""")
  }
}
