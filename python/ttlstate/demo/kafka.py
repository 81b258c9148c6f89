"""The demo's stream through Kafka (`ttlstate demo --kafka BOOTSTRAP`), the shape of a production
pipeline: the demo produces each batch of events to an input topic, every stateful query reads
that topic and writes its results to its own output topic, all with Spark's Kafka connector
(`spark-sql-kafka-0-10`), which the driver JVM must have been given when it started.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def connector_package(spark_version: str) -> str:
    """The Maven coordinates of Spark's Kafka connector for Spark `spark_version`: its Scala's
    suffix (2.12 on Spark 3.5, 2.13 on 4.x) and that version."""
    from ttlstate.spark.lines import line_for

    return f"org.apache.spark:spark-sql-kafka-0-10_{line_for(spark_version).scala}:{spark_version}"


class KafkaConnectorMissing(RuntimeError):
    """The driver JVM cannot load Spark's Kafka connector."""


def require_connector(spark: Any) -> None:
    """Raises KafkaConnectorMissing, saying how to add the connector, if the JVM lacks it."""
    try:
        spark.sparkContext._jvm.org.apache.spark.util.Utils.classForName(CONNECTOR_CLASS, False, False)
    except Exception:  # py4j's Py4JJavaError: ClassNotFoundException
        package = connector_package(spark.version)
        scala = package.split(":")[1].rsplit("_", 1)[1]
        raise KafkaConnectorMissing(
            f"--kafka needs Spark's Kafka connector, and the driver JVM cannot load {CONNECTOR_CLASS}. "
            f"Add it when the JVM starts: `--packages {package}` (Spark resolves it and kafka-clients with "
            f"Maven), or `--jars` with the local jars of spark-sql-kafka-0-10_{scala}, "
            f"spark-token-provider-kafka-0-10_{scala}, kafka-clients and commons-pool2 (comma-separated)."
        ) from None


def create_topics(spark: Any, bootstrap: str, partitions: dict[str, int]) -> None:
    """Topics (name: partitions, replication 1) through Kafka's Admin client in the driver JVM
    (kafka-clients comes with the connector), so a query can subscribe before anything was
    written and no broker needs auto-creation on."""
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.Properties()
    props.setProperty("bootstrap.servers", bootstrap)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    try:
        topics = jvm.java.util.ArrayList()
        for name, n in partitions.items():
            topics.add(jvm.org.apache.kafka.clients.admin.NewTopic(name, n, jvm.java.lang.Short.valueOf("1")))
        admin.createTopics(topics).all().get(60, jvm.java.util.concurrent.TimeUnit.SECONDS)
    finally:
        admin.close()


def produce_json(spark: Any, bootstrap: str, topic: str, rows: list[dict[str, Any]], schema: str) -> None:
    """rows as JSON values into topic, written by one Spark task whose producer lingers until it
    flushes, so the step lands as one Kafka record batch (when it fits in 1 MiB) and a running
    query sees all of it or none of it: one step is one micro-batch."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(rows, schema).coalesce(1)
    (df.select(F.to_json(F.struct(*df.columns)).alias("value"))
     .write.format("kafka").option("kafka.bootstrap.servers", bootstrap)
     .option("kafka.linger.ms", "60000").option("kafka.batch.size", str(1 << 20))
     .option("topic", topic).save())


def read_json_stream(spark: Any, bootstrap: str, topic: str, schema: str) -> Any:
    """A streaming DataFrame of topic's JSON values, from its earliest offset."""
    from pyspark.sql import functions as F

    return (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest").load()
            .select(F.from_json(F.col("value").cast("string"), schema).alias("e")).select("e.*"))


def write_json_stream(df: Any, bootstrap: str, topic: str, key: str) -> Any:
    """A DataStreamWriter of df's rows as JSON values into topic, keyed by the column `key`."""
    from pyspark.sql import functions as F

    return (df.select(F.col(key).cast("string").alias("key"), F.to_json(F.struct(*df.columns)).alias("value"))
            .writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic))


def read_json(spark: Any, bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every record of topic, its JSON value parsed, in (partition, offset) order."""
    from pyspark.sql import functions as F

    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load()
            .select("partition", "offset", F.col("value").cast("string").alias("value")).collect())
    return [json.loads(r.value) for r in sorted(rows, key=lambda r: (r.partition, r.offset))]


@dataclass(frozen=True)
class DemoKafka:
    """The Kafka side of one demo run: topic `<prefix>-events` in, `<prefix>-<provider>-<query>`
    out per query (keyed `<provider>/<query>`), on the broker(s) at `bootstrap`."""

    bootstrap: str
    prefix: str

    @property
    def events_topic(self) -> str:
        return f"{self.prefix}-events"

    def output_topic(self, query_key: str) -> str:
        return f"{self.prefix}-{query_key.replace('/', '-')}"

    def prepare(self, spark: Any, query_keys: list[str]) -> None:
        """Checks the connector, then creates the input topic and every output topic."""
        require_connector(spark)
        create_topics(spark, self.bootstrap, {self.events_topic: 1,
                                              **{self.output_topic(k): 2 for k in query_keys}})

    def produce(self, spark: Any, rows: list[dict[str, Any]], schema: str) -> None:
        produce_json(spark, self.bootstrap, self.events_topic, rows, schema)

    def source(self, spark: Any, schema: str) -> Any:
        return read_json_stream(spark, self.bootstrap, self.events_topic, schema)

    def sink(self, df: Any, query_key: str, key: str) -> Any:
        return write_json_stream(df, self.bootstrap, self.output_topic(query_key), key)

    def outputs(self, spark: Any, query_keys: list[str]) -> dict[str, list[dict[str, Any]]]:
        """Every record each query wrote to its output topic."""
        return {k: read_json(spark, self.bootstrap, self.output_topic(k)) for k in query_keys}
