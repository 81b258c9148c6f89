package ttlstate.spark

import ttlstate.conf.ConfKeys

/** What only some Spark lines offer, refused by the start checks before a query starts on a line
 *  that lacks it (the line's facts come from python/ttlstate/spark/lines.py, through BuiltFor). */
object LineFeatures {
  private val NameKey = ("^" + java.util.regex.Pattern.quote(ConfKeys.PREFIX) +
    "operator\\.([A-Za-z_][A-Za-z0-9_]*)\\.ttl$").r

  /** An `operator.<name>.ttl` key on a line whose checkpoints do not name their operators (3.5):
   *  the store could not tell which operator the name means, and the first batch would fail. */
  def operatorNameMessage(confs: Map[String, String], running: String): Option[String] =
    if (BuiltFor.OPERATOR_NAMES) None
    else confs.keys.toSeq.sorted.find(k => NameKey.findFirstIn(k).isDefined).map { key =>
      s"Invalid conf '$key' (set to '${confs(key)}'): operator names are allowed on Spark " +
        s"${BuiltFor.OPERATOR_NAMES_SINCE} and later, whose checkpoints record each stateful operator's " +
        s"name; this is Spark $running. Give the operator by its id instead: ${ConfKeys.PREFIX}" +
        "operator.<operatorId>.ttl, the number of its folder under <checkpoint>/state, which `ttlstate " +
        "inspect CHECKPOINT` lists; a query with one stateful operator has only 0."
    }
}
