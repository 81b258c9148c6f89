package ttlstate.spark

import scala.util.hashing.MurmurHash3

/** A filter of one store's encoded keys, kept by the provider across batches.
 *
 *  Spark reads state one key at a time, and a read of a key the store does not have (every
 *  new key of a deduplication or aggregation) would otherwise cost a round trip to the state
 *  server just to hear "absent". A Bloom filter has no false negatives, so "not in the filter"
 *  is exact, and keys only ever get added: a filter that holds a superset of the store's keys
 *  (keys since removed or expired, puts of an aborted batch) stays correct, only less sharp.
 *
 *  It grows with the store: a Bloom filter cannot be resized, so when its newest layer holds
 *  the keys it was sized for, a layer twice as large is stacked on it (a scalable Bloom filter):
 *  a key is in the filter if it is in any layer, new keys go to the newest. Each new layer gets
 *  more bits per key, so the false positives of all layers together stay about twice those of
 *  one. Past `maxKeys` keys it gives up (it frees its layers and every key "might" be there,
 *  which is still exact), so its memory stays bounded.
 *
 *  It is valid for one server-side lineage (the local DB the server built) and one version;
 *  the store advances `version` when it commits through it. Thread-safe: speculative task
 *  attempts may share it. */
final class KeyFilter private (val generation: Long, val handle: Int, val lineage: Long,
    firstCapacity: Long, val maxKeys: Long) {
  import KeyFilter._

  @volatile var version: Long = -1L
  private var layers: List[Layer] = List(new Layer(firstCapacity, 0)) // newest first
  private var keys = 0L
  private var gaveUp = false

  private def contains(h1: Long, h2: Long): Boolean = gaveUp || layers.exists(_.contains(h1, h2))

  def mightContain(key: Array[Byte]): Boolean = synchronized(contains(hash1(key), hash2(key)))

  /** A key that might already be in the filter is not added again: its bits are set in some
   *  layer already, and bits are never cleared. */
  def add(key: Array[Byte]): Unit = synchronized {
    val h1 = hash1(key)
    val h2 = hash2(key)
    if (!contains(h1, h2)) {
      if (keys >= maxKeys) { gaveUp = true; layers = Nil }
      else {
        if (layers.head.full) layers = new Layer(layers.head.capacity * 2, layers.size) :: layers
        layers.head.add(h1, h2)
        keys += 1
      }
    }
  }

  /** Keys added (at most one per distinct key). */
  def size: Long = synchronized(keys)
  def layerCount: Int = synchronized(layers.size)
  def memoryBytes: Long = synchronized(layers.map(_.bytes).sum)
  def active: Boolean = synchronized(!gaveUp)

  def matches(generation: Long, handle: Int, lineage: Long, version: Long): Boolean =
    this.generation == generation && this.handle == handle && this.lineage == lineage &&
      this.version == version && active
}

object KeyFilter {
  val Hashes = 7        // with 10+ bits per key: under 1% false positives per layer
  val BitsPerKey = 10   // the first layer's; each further layer has 2 more (at most 20)
  val MinCapacity = 1L << 14
  private val Seed1 = 0x5bd1e995
  private val Seed2 = 0x1b873593

  private def hash1(key: Array[Byte]): Long = MurmurHash3.bytesHash(key, Seed1).toLong
  private def hash2(key: Array[Byte]): Long = (MurmurHash3.bytesHash(key, Seed2) | 1).toLong

  /** One Bloom filter of `capacity` keys; probe i of a key is bit h1 + i * h2 (Kirsch-Mitzenmacher).
   *  Loops, not collections: this runs on every read and put. Guarded by its KeyFilter. */
  private final class Layer(val capacity: Long, index: Int) {
    private val bitsLog2 = {
      val bits = capacity * math.min(20, BitsPerKey + 2 * index)
      math.max(6, 64 - java.lang.Long.numberOfLeadingZeros(bits - 1))
    }
    private val words = new Array[Long](1 << (bitsLog2 - 6))
    private val mask = (1L << bitsLog2) - 1
    private var count = 0L

    def full: Boolean = count >= capacity
    def bytes: Long = words.length * 8L

    def add(h1: Long, h2: Long): Unit = {
      var i = 0
      while (i < Hashes) {
        val bit = (h1 + i * h2) & mask
        words((bit >>> 6).toInt) |= 1L << (bit & 63)
        i += 1
      }
      count += 1
    }

    def contains(h1: Long, h2: Long): Boolean = {
      var all = true
      var i = 0
      while (all && i < Hashes) {
        val bit = (h1 + i * h2) & mask
        all = (words((bit >>> 6).toInt) & (1L << (bit & 63))) != 0
        i += 1
      }
      all
    }
  }

  /** Sized for twice the store's current keys, then growing; at most `maxKeys` keys. */
  def sized(generation: Long, handle: Int, lineage: Long, numKeys: Long, maxKeys: Long): KeyFilter =
    withCapacity(generation, handle, lineage, math.max(MinCapacity, 2 * numKeys), maxKeys)

  /** A filter whose first layer holds `capacity` keys. */
  def withCapacity(generation: Long, handle: Int, lineage: Long, capacity: Long, maxKeys: Long): KeyFilter =
    new KeyFilter(generation, handle, lineage, math.max(1L, capacity), maxKeys)
}
