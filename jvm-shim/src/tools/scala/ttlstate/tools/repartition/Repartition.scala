package ttlstate.tools.repartition

import java.io.{ByteArrayOutputStream, DataOutputStream}
import java.nio.ByteBuffer

import scala.collection.mutable

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.Path
import org.apache.spark.{Partitioner, SparkContext, TaskContext}
import org.apache.spark.rdd.ShuffledRDD
import org.apache.spark.sql.types.{DataType, StructType}
import org.apache.spark.util.SerializableConfiguration
import ttlstate.client.{Json, PayloadWriter, Protocol}

/** `ttlstate repartition`'s Spark job (python/ttlstate/spark/repartition.py plans it and switches
 *  the checkpoint over once it succeeded): every old store of the plan is read on an executor,
 *  each entry routed to its new partition by Spark's hash partitioning of its key (KeyRouter) and
 *  shuffled there, and every new store is written on an executor into the staging folder, as
 *  whole TtlValues (their timestamps kept) committed as the same version. One task per old store,
 *  then one per new store; the driver sees only counts.
 *
 *  Shuffle records are chunks: an `Entries` chunk is OP_WRITES records (WRITE_PUT_ENTRY, key,
 *  TtlValue) ready to be sent as they are; a `Sent` record tells a new store how many entries one
 *  old store sent it, and how many that store held, so every new store checks it received exactly
 *  what was sent, and the driver that every entry of the old stores was committed once. */
object Repartition {
  private val Entries: Byte = 0
  private val Sent: Byte = 1
  private val ChunksBudget = 16 << 20

  /** The new store of each shuffle partition: the partition is the record's key. */
  final class Targets(n: Int) extends Partitioner {
    def numPartitions: Int = n
    def getPartition(key: Any): Int = key.asInstanceOf[Int]
  }

  /** JSON of what `stateRoot` holds (StateLayout), for the plan. */
  def describe(sc: SparkContext, stateRoot: String): String = StateLayout.describe(stateRoot, sc.hadoopConfiguration)

  /** Runs the plan's job; returns a JSON array with one object per new store. */
  def copy(sc: SparkContext, planJson: String): String = {
    val plan = Plan.parse(planJson)
    val conf = new SerializableConfiguration(sc.hadoopConfiguration)
    val reads = for ((g, i) <- plan.groups.zipWithIndex; p <- g.oldPartitions) yield (i, p)
    sc.setJobDescription(s"ttlstate repartition: ${reads.size} stores read, ${plan.targets} written")
    try {
      sc.setCallSite("ttlstate repartition: read stores")
      val routed = sc.parallelize(reads, math.max(reads.size, 1)).mapPartitions(_.flatMap { case (g, p) =>
        read(plan, g, p, conf.value)
      })
      sc.setCallSite("ttlstate repartition: write stores")
      val written = new ShuffledRDD[Int, Array[Byte], Array[Byte]](routed, new Targets(plan.targets))
        .mapPartitionsWithIndex((t, records) => Iterator(write(plan, t, records, conf.value)))
      written.collect().mkString("[", ",", "]")
    } finally {
      sc.clearCallSite()
      sc.setJobDescription(null)
    }
  }

  /** `store`, closed when the task ends however it ends (the server drops its copy of the store). */
  private def closedWithTask(store: RawStore): RawStore = {
    Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => store.close()))
    store
  }

  /** How a stored key of `group` finds its new partition: by its column family's grouping key
   *  (FamilyRouter, the families' encoders read from the operator's schema file), else KeyRouter. */
  private def router(group: StoreGroup, label: String, hadoopConf: Configuration): Array[Byte] => Int =
    if (group.route == Route.Families) {
      val path = new Path(group.schemaFile)
      val in = path.getFileSystem(hadoopConf).open(path)
      val decoders = try SchemaFile.decoders(in) finally in.close()
      new FamilyRouter(group.families, decoders, group.newPartitions, label).partition
    } else {
      val keySchema = DataType.fromJson(group.keySchemaJson).asInstanceOf[StructType]
      new KeyRouter(keySchema, group.route, group.newPartitions, label).partition
    }

  /** One old store's entries as shuffle records, streamed from the server as they are routed. */
  private def read(plan: Plan, g: Int, oldPartition: Int, hadoopConf: Configuration): Iterator[(Int, Array[Byte])] = {
    val group = plan.groups(g)
    val store = closedWithTask(new RawStore(plan.stateRoot, group, oldPartition, plan.readConfs, hadoopConf,
      plan.checkpointIds))
    val partitionOf = router(group, store.label, hadoopConf)
    val chunkBytes = math.max(16 << 10, math.min(256 << 10, ChunksBudget / group.newPartitions))
    val first = plan.firstTarget(g)
    store.load(plan.version, 0L, readOnly = true, empty = false,
      if (plan.checkpointIds) group.oldIds(group.oldPartitions.indexOf(oldPartition)) else "")
    val entries = store.entries()
    val chunks = Array.fill(group.newPartitions)(new ByteArrayOutputStream(1024))
    val out = chunks.map(new DataOutputStream(_))
    val counts = new Array[Int](group.newPartitions)
    val sent = new Array[Long](group.newPartitions)
    var total = 0L

    def chunkOf(t: Int): (Int, Array[Byte]) = {
      val body = chunks(t).toByteArray
      val record = ByteBuffer.allocate(5 + body.length).put(Entries).putInt(counts(t)).put(body).array
      chunks(t).reset()
      counts(t) = 0
      (first + t, record)
    }

    new Iterator[(Int, Array[Byte])] {
      private val ready = mutable.Queue.empty[(Int, Array[Byte])]
      private var finished = false

      def hasNext: Boolean = {
        while (ready.isEmpty && !finished) {
          if (entries.hasNext) {
            val (key, stored) = entries.next()
            val t = partitionOf(key)
            out(t).writeByte(Protocol.WRITE_PUT_ENTRY)
            out(t).writeInt(key.length)
            out(t).write(key)
            out(t).writeInt(stored.length)
            out(t).write(stored)
            counts(t) += 1
            sent(t) += 1
            total += 1
            if (chunks(t).size >= chunkBytes) ready.enqueue(chunkOf(t))
          } else {
            finished = true
            store.close()
            for (t <- chunks.indices) {
              if (counts(t) > 0) ready.enqueue(chunkOf(t))
              ready.enqueue(first + t -> ByteBuffer.allocate(21).put(Sent).putInt(oldPartition).putLong(sent(t))
                .putLong(total).array)
            }
          }
        }
        ready.nonEmpty
      }

      def next(): (Int, Array[Byte]) = {
        if (!hasNext) throw new NoSuchElementException(store.label)
        ready.dequeue()
      }
    }
  }

  /** Writes new store `t` from its shuffle records; its report as JSON. */
  private def write(plan: Plan, t: Int, records: Iterator[(Int, Array[Byte])], hadoopConf: Configuration): String = {
    val g = plan.firstTarget.lastIndexWhere(_ <= t)
    val group = plan.groups(g)
    val partition = t - plan.firstTarget(g)
    val store = closedWithTask(new RawStore(plan.stagingRoot, group, partition, plan.readConfs ++ group.confs,
      hadoopConf, plan.checkpointIds))
    val sources = mutable.Map.empty[Int, (Long, Long)] // old partition -> (sent here, its rows)
    var received = 0L
    var ckptId = ""
    try {
      store.load(plan.version - 1, group.batchTimeMs, readOnly = false, empty = true)
      records.foreach { case (_, bytes) =>
        val in = ByteBuffer.wrap(bytes)
        in.get() match {
          case Entries =>
            val n = in.getInt()
            store.write(n, new PayloadWriter(bytes.length).raw(bytes, 5, bytes.length - 5))
            received += n
          case Sent => sources(in.getInt()) = (in.getLong(), in.getLong())
        }
      }
      val (version, keys, id) = store.commit()
      ckptId = id
      val expected = sources.values.map(_._1).sum
      if (sources.keySet != group.oldPartitions.toSet || received != expected || keys != received || version != plan.version) {
        throw new IllegalStateException(s"${store.label}: received $received entries of the $expected sent " +
          s"(from old partitions ${sources.keys.toSeq.sorted.mkString(",")}), committed $keys keys as version " +
          s"$version (expected ${plan.version}); the checkpoint is unchanged")
      }
    } finally store.close()
    Json.obj(Seq("operator" -> group.operatorId.toString, "store" -> Json.str(group.storeName),
      "partition" -> partition.toString, "rows" -> received.toString, "ckptId" -> Json.str(ckptId),
      "sourceRows" -> sources.toSeq.sortBy(_._1).map { case (p, (_, rows)) => s"""{"partition":$p,"rows":$rows}""" }
        .mkString("[", ",", "]")))
  }
}
