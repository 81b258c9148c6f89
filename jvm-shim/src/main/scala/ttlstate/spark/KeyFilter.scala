package ttlstate.spark

import scala.util.hashing.MurmurHash3

/** A Bloom filter of one store's encoded keys, kept by the provider across batches.
 *
 *  Spark reads state one key at a time, and a read of a key the store does not have (every
 *  new key of a deduplication or aggregation) would otherwise cost a round trip to the state
 *  server just to hear "absent". A Bloom filter has no false negatives, so "not in the filter"
 *  is exact, and keys only ever get added: a filter that holds a superset of the store's keys
 *  (keys since removed or expired, puts of an aborted batch) stays correct, only less sharp.
 *
 *  It is valid for one server-side lineage (the local DB the server built) and one version;
 *  the store advances `version` when it commits through it. Thread-safe: speculative task
 *  attempts may share it. */
final class KeyFilter private (val generation: Long, val handle: Int, val lineage: Long,
    val capacity: Long, bitsLog2: Int) {
  @volatile var version: Long = -1L
  private val words = new Array[Long](1 << (bitsLog2 - 6))
  private val mask = (1L << bitsLog2) - 1
  private var inserted = 0L

  // Double hashing (Kirsch-Mitzenmacher): probe i is h1 + i * h2. Loops, not collections:
  // this runs on every read and put.
  def add(key: Array[Byte]): Unit = synchronized {
    val h1 = MurmurHash3.bytesHash(key, KeyFilter.Seed1).toLong
    val h2 = (MurmurHash3.bytesHash(key, KeyFilter.Seed2) | 1).toLong
    var fresh = false
    var i = 0
    while (i < KeyFilter.Hashes) {
      val bit = (h1 + i * h2) & mask
      val w = (bit >>> 6).toInt
      val m = 1L << (bit & 63)
      if ((words(w) & m) == 0) { words(w) |= m; fresh = true }
      i += 1
    }
    if (fresh) inserted += 1
  }

  def mightContain(key: Array[Byte]): Boolean = synchronized {
    val h1 = MurmurHash3.bytesHash(key, KeyFilter.Seed1).toLong
    val h2 = (MurmurHash3.bytesHash(key, KeyFilter.Seed2) | 1).toLong
    var all = true
    var i = 0
    while (all && i < KeyFilter.Hashes) {
      val bit = (h1 + i * h2) & mask
      all = (words((bit >>> 6).toInt) & (1L << (bit & 63))) != 0
      i += 1
    }
    all
  }

  /** More distinct keys than it was sized for: false positives grow, so rebuild it. */
  def overfull: Boolean = synchronized(inserted > capacity)

  def matches(generation: Long, handle: Int, lineage: Long, version: Long): Boolean =
    this.generation == generation && this.handle == handle && this.lineage == lineage &&
      this.version == version && !overfull
}

object KeyFilter {
  val Hashes = 7        // with 10+ bits per key: under 1% false positives
  val BitsPerKey = 10
  val MinCapacity = 1L << 14
  private val Seed1 = 0x5bd1e995
  private val Seed2 = 0x1b873593

  /** Sized for twice the store's current keys, so it absorbs growth before a rebuild. */
  def sized(generation: Long, handle: Int, lineage: Long, numKeys: Long): KeyFilter = {
    val capacity = math.max(MinCapacity, 2 * numKeys)
    val bits = capacity * BitsPerKey
    val bitsLog2 = math.max(6, 64 - java.lang.Long.numberOfLeadingZeros(bits - 1))
    new KeyFilter(generation, handle, lineage, capacity, bitsLog2)
  }
}
