package ttlstate.tools.repartition

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

/** How a stored key finds its new partition: Spark's hash partitioning of the columns the operator
 *  partitions its input by, which `ttlstate repartition` (python/ttlstate/spark/repartition_plan.py)
 *  decides per operator and store.
 *
 *  - `WholeKey`: every column of the key (aggregation, deduplication, flatMapGroupsWithState,
 *    applyInPandasWithState, a join's keyToNumValues store);
 *  - `DropLast`: all but the last column (a join's keyWithIndexToValue store: the index);
 *  - `Prefix(n)`: the first n columns, which ttlstate stores as a prefix row before the key
 *    (session windows: the key without its session);
 *  - `Auto`: Spark 3.5 has no operator metadata to say which stores are session windows: a key
 *    stored with a prefix row (its length is 4 modulo 8, an UnsafeRow's is 0) is routed as
 *    `Prefix(all columns but the last)`, any other by `WholeKey`;
 *  - `Single`: partition 0 (a streaming limit's one store);
 *  - `Families`: by each column family's grouping key (FamilyRouter: transformWithState's store). */
sealed trait Route
object Route {
  case object WholeKey extends Route
  case object DropLast extends Route
  final case class Prefix(columns: Int) extends Route
  case object Single extends Route
  case object Auto extends Route
  case object Families extends Route

  def parse(text: String): Route = text match {
    case "key" => WholeKey
    case "dropLast" => DropLast
    case "single" => Single
    case "auto" => Auto
    case "families" => Families
    case p if p.startsWith("prefix:") => Prefix(p.stripPrefix("prefix:").toInt)
    case other => throw new IllegalArgumentException(s"unknown route '$other'")
  }
}

/** One store of one operator, moved from `oldPartitions` to `newPartitions` partitions: its
 *  version `version` is read in each old partition under `stateRoot` and written as that version
 *  into each new one under `stagingRoot`, opened with `confs` (the TTL settings the old files
 *  recorded) at `batchTimeMs` (the batch time they recorded for that version). `oldIds`: on
 *  checkpoint format 2, each old partition's checkpoint id of that version (empty on format 1).
 *  `families`: a store with column families (transformWithState's) is routed by FamilyRouter, each
 *  family by its path to the grouping key, with the key encoders of `schemaFile`; empty for others. */
final case class StoreGroup(operatorId: Long, storeName: String, keySchemaJson: String, valueSchemaJson: String,
    numColsPrefixKey: Int, route: Route, oldPartitions: Seq[Int], newPartitions: Int,
    confs: Map[String, String], batchTimeMs: Long, oldIds: Seq[String],
    families: Map[String, Option[Seq[Int]]] = Map.empty, schemaFile: String = "") {
  def label: String = s"operator $operatorId, store $storeName"
}

/** What the job moves, as the Python side planned it (JSON). `readConfs`: the ttlstate confs the
 *  old stores are read with (the session's: engine, workers, interpreter). `checkpointIds`:
 *  checkpoint format 2 (stores loaded by id, each commit making a new one). */
final case class Plan(stateRoot: String, stagingRoot: String, version: Long, groups: IndexedSeq[StoreGroup],
    readConfs: Map[String, String], checkpointIds: Boolean) {
  /** The first new store's index of each group, and the number of new stores. */
  val firstTarget: IndexedSeq[Int] = groups.scanLeft(0)(_ + _.newPartitions)
  def targets: Int = firstTarget.last
}

object Plan {
  private val mapper = new ObjectMapper()

  private def strings(node: JsonNode): Map[String, String] =
    if (node == null) Map.empty else node.fieldNames().asScala.map(k => k -> node.get(k).asText()).toMap

  private def families(node: JsonNode): Map[String, Option[Seq[Int]]] =
    if (node == null || node.isNull) Map.empty
    else node.fieldNames().asScala.map { name =>
      val path = node.get(name)
      name -> (if (path.isNull) None else Some(path.elements().asScala.map(_.asInt()).toSeq))
    }.toMap

  def parse(json: String): Plan = {
    val root = mapper.readTree(json)
    val groups = root.get("groups").elements().asScala.map { g =>
      StoreGroup(g.get("operator").asLong(), g.get("store").asText(), g.get("keySchema").asText(),
        g.get("valueSchema").asText(), g.get("numColsPrefixKey").asInt(), Route.parse(g.get("route").asText()),
        g.get("oldPartitions").elements().asScala.map(_.asInt()).toSeq, g.get("newPartitions").asInt(),
        strings(g.get("confs")), g.get("batchTimeMs").asLong(),
        Option(g.get("oldIds")).map(_.elements().asScala.map(_.asText()).toSeq).getOrElse(Nil),
        families(g.get("families")), Option(g.get("schemaFile")).map(_.asText()).getOrElse(""))
    }.toIndexedSeq
    Plan(root.get("stateRoot").asText(), root.get("stagingRoot").asText(), root.get("version").asLong(), groups,
      strings(root.get("readConfs")), Option(root.get("checkpointIds")).exists(_.asBoolean()))
  }
}
