package ttlstate.metadata

import org.scalatest.funsuite.AnyFunSuite

/** The one reader of Spark's checkpoint files, on texts as Spark 4.3 writes them. */
class SparkMetadataSuite extends AnyFunSuite {
  private val offsets =
    """v1
      |{"batchWatermarkMs":5000,"batchTimestampMs":1700000000123,"conf":{"spark.sql.streaming.stateStore.providerClass":"ttlstate.spark.TtlStateStoreProvider","spark.sql.shuffle.partitions":"2"}}
      |{"logOffset":3}""".stripMargin

  test("an offset log entry's batch clock and pinned confs") {
    assert(SparkMetadata.offsetClock(offsets).contains(1700000000123L -> 5000L))
    assert(SparkMetadata.offsetConfs(offsets)(SparkMetadata.ProviderKey) == "ttlstate.spark.TtlStateStoreProvider")
    assert(SparkMetadata.offsetConfs("v1\n{\"batchTimestampMs\":1}").isEmpty)
    assert(SparkMetadata.offsetClock("v1\n{\"batchTimestampMs\":1}").contains(1L -> 0L))
    assert(SparkMetadata.offsetClock("v1").isEmpty)
    assert(SparkMetadata.offsetClock("v1\nnot json").isEmpty)
  }

  test("an operator metadata file's id, name and stores") {
    val text =
      """v1
        |{"operatorInfo":{"operatorId":2,"operatorName":"dedupe"},"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":4}]}
        |""".stripMargin
    assert(SparkMetadata.operatorName(text).contains(2L -> "dedupe"))
    assert(SparkMetadata.operatorStores(text).contains(Seq(("default", 0, 4))))
    assert(SparkMetadata.operatorName(text.replace("v1", "v2")).isEmpty)
    assert(SparkMetadata.operatorName("v1\n{\"operatorInfo\":{\"operatorId\":2}}").isEmpty)
  }

  test("the query id of a checkpoint's metadata file") {
    assert(SparkMetadata.queryId("""{"id":"6d3c1f2e-0000-4000-8000-000000000001"}""")
      .contains("6d3c1f2e-0000-4000-8000-000000000001"))
    assert(SparkMetadata.queryId("{}").isEmpty)
    assert(SparkMetadata.queryId("").isEmpty)
  }
}
