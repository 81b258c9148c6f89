package ttlstate.spark

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan}
import org.apache.spark.sql.internal.SQLConf
import ttlstate.conf.ConfKeys
import ttlstate.metadata.SparkMetadata

/** transformWithState served by ttlstate's own store (`transformWithState=ttlstate`, opt-in):
 *  its stores' column families are key prefixes in ttlstate's store (`ColumnFamilies`), and from
 *  Spark 4.2 its operators, which accept only Spark's RocksDB provider by class name, are
 *  replaced after Spark plans each batch by subclasses that also accept ttlstate's
 *  (`TransformWithStateGate`, per Spark line). Otherwise (the default) such a query is routed to
 *  Spark's RocksDB provider (`TransformWithStateRouting`). */
object TransformWithStateServing {
  val Rocksdb = "rocksdb"
  val Ttlstate = "ttlstate"

  /** Where the session keeps transformWithState's state: `rocksdb` or `ttlstate` (a value that is
   *  neither fails at start, by ttlstate's conf checks). */
  def choice(confs: String => Option[String]): String =
    confs(ConfKeys.TRANSFORM_WITH_STATE).map(_.trim.toLowerCase(java.util.Locale.ROOT)).getOrElse(Rocksdb)

  def served(session: SparkSession): Boolean = choice(session.conf.getOption) == Ttlstate

  /** Whether an operator planned under `conf` runs on ttlstate's provider. */
  def admits(conf: SQLConf): Boolean = conf.getConf(SQLConf.STATE_STORE_PROVIDER_CLASS) == StartChecks.ProviderClass

  /** Admits the transformWithState operators of each batch of a query on ttlstate's provider;
   *  installed by `TtlStateExtensions`, as `ReadAheadRule` is. */
  final case class Admit(session: SparkSession) extends ColumnarRule {
    override def preColumnarTransitions: Rule[SparkPlan] = new Rule[SparkPlan] {
      override def apply(plan: SparkPlan): SparkPlan =
        if (session.conf.get(SparkMetadata.ProviderKey, "") == StartChecks.ProviderClass) TransformWithStateGate.admit(plan)
        else plan
    }
  }
}
