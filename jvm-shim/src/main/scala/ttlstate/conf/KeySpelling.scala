package ttlstate.conf

import java.util.Locale

/** Conf keys that look like ttlstate's but are not, and what a session with TTL off is told.
 *
 *  Spark's conf keys are case-sensitive and only `spark.sql.streaming.stateStore.*` reaches a
 *  provider, so `spark.sql.streaming.statestore.ttlstate.ttl` (or a key without the `ttlstate.`
 *  segment) is silently ignored and TTL stays off: the start checks name such a key and its
 *  right spelling. Pure functions, so the shim's unit tests check them. */
object KeySpelling {
  private val SparkStorePrefix = "spark.sql.streaming.statestore."
  private val Operator = """operator\.([a-z0-9_]+)\.ttl""".r
  private def suffixes: Seq[String] = ConfKeys.SUFFIXES.filterNot(_.contains("<"))

  /** Our key for `suffix` (any case), or None: `ttl` -> `...ttlstate.ttl`, `Operator.Dedupe.TTL`
   *  -> `...ttlstate.operator.Dedupe.ttl` (the operator's own spelling is kept). */
  private def ours(suffix: String): Option[String] = {
    val lower = suffix.toLowerCase(Locale.ROOT)
    suffixes.find(_.toLowerCase(Locale.ROOT) == lower).map(ConfKeys.PREFIX + _).orElse(lower match {
      case Operator(_) => Some(ConfKeys.PREFIX + "operator." + suffix.split('.')(1) + ".ttl")
      case _ => None
    })
  }

  /** The key meant by `key`, when `key` is not under ttlstate's prefix but looks like one of its
   *  keys: ttlstate's prefix in another case, `ttlstate.<suffix>` under another prefix, or one of
   *  its suffixes right under Spark's `stateStore.` prefix (the `ttlstate.` segment left out). */
  def meant(key: String): Option[String] = {
    val lower = key.toLowerCase(Locale.ROOT)
    if (key.startsWith(ConfKeys.PREFIX)) None
    else {
      val at = lower.lastIndexOf("ttlstate.")
      if (at >= 0) ours(key.substring(at + "ttlstate.".length))
      else if (lower.startsWith(SparkStorePrefix)) ours(key.substring(SparkStorePrefix.length))
      else None
    }
  }

  /** Our key that `key`, under our prefix, spells in another case (`...ttlstate.TTL`). */
  def inOtherCase(key: String): Option[String] =
    if (!key.startsWith(ConfKeys.PREFIX)) None
    else ours(key.substring(ConfKeys.PREFIX.length)).filter(_ != key)

  /** The warning for a key that looks like ttlstate's but is not (None for any other key). */
  def lookalikeMessage(key: String, value: String): Option[String] = meant(key).map { right =>
    s"ttlstate: the conf '$key' (set to '$value') is not a ttlstate key, so it is ignored (Spark's conf " +
      s"keys are case-sensitive, and only keys under ${ConfKeys.PREFIX} reach ttlstate): did you mean '$right'?"
  }

  /** The INFO line for a query on ttlstate whose global TTL is off (None when it is on). */
  def ttlOffNote(confs: Map[String, String], checkpoint: String): Option[String] =
    if (!ConfValues.isOff(ConfKeys.TTL, confs.get(ConfKeys.TTL))) None
    else {
      val own = confs.keys.filter(k => k.startsWith(ConfKeys.PREFIX + "operator.") && !ConfValues.isOff(ConfKeys.TTL, confs.get(k)))
        .toSeq.sorted
      val scope = if (own.isEmpty) "this query" else s"this query's operators without their own TTL (${own.mkString(", ")})"
      Some(s"ttlstate: TTL is off for $scope (checkpoint $checkpoint): ${ConfKeys.TTL} is " +
        s"${confs.get(ConfKeys.TTL).map(v => s"'$v'").getOrElse("not set")}, so their state is kept as Spark's own " +
        s"providers keep it. Set ${ConfKeys.TTL} (e.g. 30m, or " + "configure(ttl=\"30m\")) to expire keys untouched that long.")
    }
}
