package ttlstate.tools

import java.io.{BufferedReader, BufferedWriter, InputStreamReader, OutputStreamWriter, PrintWriter}

import org.apache.hadoop.conf.Configuration
import ttlstate.cache.{Expiry, KeyFilter}
import ttlstate.client.{Json, Protocol}
import ttlstate.conf.{ConfKeys, ConfValues}
import ttlstate.metadata.OperatorNames
import ttlstate.server.ServerPython
import ttlstate.spark.Metrics

/** Command-line answers of the shim's pure rules, for the Python tests that compare them with
 *  Python's and C++'s (`java -cp <shim jar>:<tools jar>:<spark jars> ttlstate.tools.<Hook>`).
 *  They live in the tools jar, not in the executor's. */
private object Lines {
  /** Applies `answer` to every line of stdin, printing one line each; with `trim = false` the line
   *  is passed as it is. Each answer is flushed, so a test can hold the hook open and ask line by
   *  line (a hypothesis test asks one example at a time). */
  def map(answer: String => String, trim: Boolean = true): Unit = {
    val in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"))
    val out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, "UTF-8")))
    var line = in.readLine()
    while (line != null) {
      out.println(answer(if (trim) line.trim else line))
      out.flush()
      line = in.readLine()
    }
  }
}

/** Prints the shim's protocol constants, conf keys (with what each takes) and metric kinds as JSON. */
object Constants {
  private def spec(s: ConfKeys.Spec): String = {
    val bounds = s.bounds.map { case (low, high) => s"[$low,$high]" }.getOrElse("null")
    Seq("key" -> Json.str(s.key), "kind" -> Json.str(s.kind), "default" -> Json.str(s.default), "bounds" -> bounds,
      "exclusive" -> s.exclusive.toString, "off" -> s.off.toString,
      "choices" -> s.choices.map(Json.str).mkString("[", ",", "]"), "allowed" -> Json.str(s.allowed))
      .map { case (k, v) => s"${Json.str(k)}:$v" }.mkString("{", ",", "}")
  }

  def main(args: Array[String]): Unit = {
    val protocol = Protocol.all.map { case (k, v) => s"${Json.str(k)}:$v" }.mkString("{", ",", "}")
    val keys = ConfKeys.SUFFIXES.map(Json.str).mkString("[", ",", "]")
    val specs = ConfKeys.SPECS.map(spec).mkString("[", ",", "]")
    val offWords = ConfKeys.OFF_WORDS.map(Json.str).mkString("[", ",", "]")
    val metrics = Metrics.kinds.map { case (n, k) => s"${Json.str(n)}:${Json.str(k)}" }.mkString("{", ",", "}")
    println(s"""{"protocol":$protocol,"confPrefix":${Json.str(ConfKeys.PREFIX)},"confSuffixes":$keys,""" +
      s""""confSpecs":$specs,"offWords":$offWords,"metrics":$metrics}""")
  }
}

/** Reads lines "ts ttl now", prints 1 (expired) or 0 per line. */
object ExpiryCases {
  def main(args: Array[String]): Unit = Lines.map { line =>
    val Array(ts, ttl, now) = line.split(" ").map(_.toLong)
    if (Expiry.isExpired(ts, ttl, now)) "1" else "0"
  }
}

/** Reads lines "size|<value>" or "duration|<value>", prints the bytes or milliseconds the shim
 *  reads, or "-" when it is not one. */
object ConfValueCases {
  def main(args: Array[String]): Unit = Lines.map { line =>
    val (kind, value) = line.splitAt(line.indexOf('|'))
    val parsed = if (kind == "size") ConfValues.sizeBytes(value.drop(1)) else ConfValues.durationMs(value.drop(1))
    parsed.fold("-")(_.toString)
  }
}

/** Reads lines "<full key>|<value>" (the value as it is, blanks kept) of duration, size and int keys,
 *  prints what the shim reads (ConfValues.number: ms, bytes or the int), "off", or "-" when it is
 *  not one; then the key's default as the shim reads it when the value is not one ("-|default"). */
object ConfKeyCases {
  def main(args: Array[String]): Unit = Lines.map({ line =>
    val (key, value) = line.splitAt(line.indexOf('|'))
    val spec = ConfKeys.spec(key)
    val read = ConfValues.number(spec, value.drop(1)).map(n => if (n == ConfValues.Off) "off" else n.toString)
    s"${read.getOrElse("-")}|${ConfValues.get(key, Map(key -> value.drop(1)))}"
  }, trim = false)
}

/** Reads keys in hex, one per line, and prints their two key filter hashes. */
object KeyHashes {
  def main(args: Array[String]): Unit = Lines.map { hex =>
    val (h1, h2) = KeyFilter.hashes(hex.grouped(2).map(b => Integer.parseInt(b, 16).toByte).toArray)
    s"$h1 $h2"
  }
}

/** Reads key counts, one per line, and prints the bits (log2) of the first layer of a key filter
 *  sized for each. */
object KeyFilterFirstLayer {
  def main(args: Array[String]): Unit = Lines.map(n => KeyFilter.firstLayerBitsLog2For(n.toLong).toString)
}

/** `OperatorNamesJson <checkpoint>/state`: the operator names the shim reads, as JSON. */
object OperatorNamesJson {
  def main(args: Array[String]): Unit = println(OperatorNames.json(OperatorNames.read(args(0), new Configuration())))
}

/** `ServerPythonChoice PYTHON_CONF LOCAL_MODE_PYTHON_CONF SPARK_PYSPARK_PYTHON PYSPARK_PYTHON
 *  local|cluster DRIVER` ("-" = not set) prints the interpreter the shim would start the state
 *  server with. */
object ServerPythonChoice {
  def main(args: Array[String]): Unit = {
    def arg(i: Int) = Option(args(i)).filter(_ != "-")
    val confs = Seq(ConfKeys.PYTHON -> arg(0), ConfKeys.LOCAL_MODE_PYTHON -> arg(1))
      .collect { case (k, Some(v)) => k -> v }.toMap
    println(ServerPython.choose(confs, arg(2), arg(3), localMode = args(4) == "local", driver = arg(5)))
  }
}

/** `DriverPythonChoice SPARK_DRIVER_PYTHON PYSPARK_DRIVER_PYTHON LOCAL_MODE_PYTHON PARENT
 *  SPARK_PYSPARK_PYTHON PYSPARK_PYTHON TTLSTATE_PYTHON` ("-" = not set) prints the interpreter the
 *  start checks would validate the confs with (paths checked on this machine). */
object DriverPythonChoice {
  def main(args: Array[String]): Unit = {
    def arg(i: Int) = Option(args(i)).filter(_ != "-")
    println(ServerPython.forDriver(ServerPython.DriverHints(arg(0), arg(1), arg(2), arg(3), arg(4), arg(5), arg(6))))
  }
}

/** Reads lines of column family names, prints the hex of the key prefix the shim stores each
 *  family's keys behind (`KeyCodec.familyPrefix`), or "-" when it refuses the name. */
object FamilyPrefixCases {
  def main(args: Array[String]): Unit = Lines.map({ name =>
    try ttlstate.store.KeyCodec.familyPrefix(name).map(b => f"${b & 0xff}%02x").mkString
    catch { case _: IllegalArgumentException => "-" }
  }, trim = false)
}
