package ttlstate.cache

import java.nio.{ByteBuffer, ByteOrder}
import java.util.concurrent.atomic.AtomicLong

import ttlstate.client.Protocol
import ttlstate.conf.ConfKeys
import ttlstate.conf.ConfValues

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
 *  one. Past `maxKeys` keys of its store, or when the executor's filters together would pass
 *  their byte budget (`setBudget`), it gives up (it frees its layers and every key "might" be
 *  there, which is still exact), so memory stays bounded per store and per executor.
 *
 *  It is valid for one server-side lineage (the local DB the server built) and one version;
 *  the store advances `version` when it commits through it. Thread-safe: speculative task
 *  attempts may share it. */
final class KeyFilter private (val generation: Long, val handle: Int, val lineage: Long,
    firstCapacity: Long, val maxKeys: Long, owner: String) {
  import KeyFilter._

  @volatile var version: Long = -1L
  // >= 0: the version whose keys this filter still lacks (a restore's, until the state server's
  // scan of them is merged, `mergeFirstLayer`); every key "might" be there meanwhile, which is
  // exact, while the keys written since are added as usual.
  @volatile private var lacking: Long = -1L
  private val reserved = new AtomicLong // bytes of the executor's budget this filter holds
  private val release = cleaner.register(this, new Release(reserved)) // also when dropped unclosed
  private var layers: Array[Layer] = Array.empty // newest first: an array, as every read and put walks it
  private var keys = 0L
  private var gaveUp = false
  synchronized(grow(firstCapacity, 0))

  /** Stacks a layer, if the budget has room for it; else gives up. */
  private def grow(capacity: Long, index: Int): Unit = {
    val bytes = Layer.bytes(capacity, index)
    if (reserve(bytes)) { reserved.addAndGet(bytes); layers = new Layer(capacity, index) +: layers }
    else giveUp(s"the executor's key filters would pass ${ConfKeys.KEY_FILTER_MAX_BYTES}=${budget} bytes " +
      s"(${usedBytes} used; this one needed ${bytes} more)")
  }

  /** Reads of absent keys reach the server from now on: said once, as it costs throughput. */
  private def giveUp(why: String): Unit = {
    if (!gaveUp) KeyFilter.log.warn(s"$owner: key filter dropped at $keys keys: $why; reads of " +
      "keys the store does not have now cost a round trip to the state server")
    gaveUp = true
    layers = Array.empty
    unreserve(reserved.getAndSet(0L))
  }

  private def contains(h1: Long, h2: Long): Boolean = gaveUp || lacking >= 0 || inLayers(h1, h2)
  private def inLayers(h1: Long, h2: Long): Boolean = {
    var i = 0
    while (i < layers.length && !layers(i).contains(h1, h2)) i += 1
    i < layers.length
  }

  def mightContain(key: KeyBytes): Boolean = synchronized(contains(hash1(key), hash2(key)))
  def mightContain(key: Array[Byte]): Boolean = mightContain(new KeyBytes().set(key))

  /** A key that might already be in the filter is not added again: its bits are set in some
   *  layer already, and bits are never cleared. */
  def add(key: KeyBytes): Unit = synchronized(insert(hash1(key), hash2(key)))
  def add(key: Array[Byte]): Unit = add(new KeyBytes().set(key))

  /** How many bits (log2) the first layer has: what the state server sets for `fillFirstLayer`. */
  def firstLayerBitsLog2: Int = synchronized(layers.last.bitsLog2)

  /** Takes the first layer's bits as the state server set them from the hashes of the `keyCount`
   *  keys a restore loaded (little-endian u64 words; the probes as `add` sets them, see the
   *  server's native/include/ttlstate/key_hash.h). Only into a filter nothing was added to. */
  def fillFirstLayer(words: Array[Byte], keyCount: Long): Unit = synchronized {
    if (!gaveUp) {
      require(layers.size == 1 && keys == 0, "key filter: bits are taken only into a new filter")
      layers.last.load(words, keyCount, merge = false)
      keys = keyCount
    }
  }

  /** A filter of `version`, whose keys the state server is still scanning: it answers "might
   *  be there" for every key until `mergeFirstLayer` takes them. Only on a new filter. */
  def lackKeysOf(version: Long): Unit = synchronized {
    require(layers.size == 1 && keys == 0, "key filter: only a new filter lacks a version's keys")
    lacking = version
  }

  /** The version whose keys it lacks, or -1. */
  def lackingVersion: Long = lacking

  /** Adds the `keyCount` keys whose bits the state server set, as `fillFirstLayer` takes them,
   *  to the keys added since: from now on the filter answers again. */
  def mergeFirstLayer(words: Array[Byte], keyCount: Long): Unit = synchronized {
    if (!gaveUp) {
      layers.last.load(words, keyCount, merge = true)
      keys += keyCount
    }
    lacking = -1L
  }

  private def insert(h1: Long, h2: Long): Unit = if (!gaveUp && !inLayers(h1, h2)) {
    if (keys >= maxKeys) giveUp(s"the store has more than ${ConfKeys.KEY_FILTER_MAX_KEYS}=$maxKeys keys")
    else {
      if (layers.head.full) grow(layers.head.capacity * 2, layers.size)
      if (!gaveUp) { layers.head.add(h1, h2); keys += 1 }
    }
  }

  /** Gives up for good and returns its bytes to the executor's budget (a newer filter
   *  replaced it, or its provider closed). A store still using it stays exact. */
  def close(): Unit = { synchronized { gaveUp = true; layers = Array.empty }; release.clean() }

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
  // The provider's logger: the line reads as the store's.
  private val log = org.slf4j.LoggerFactory.getLogger("ttlstate.spark.TtlStateStoreProvider")
  // Shared with the state server, which sets a restore's first layer (Protocol's KEY_FILTER_*).
  // 7 probes, with 10+ bits per key: under 1% false positives per layer. 10 bits per key in the
  // first layer, 2 more in each further one (at most 20).
  val Hashes: Int = Protocol.KEY_FILTER_PROBES
  val BitsPerKey: Int = Protocol.KEY_FILTER_BITS_PER_KEY
  val MinCapacity: Long = Protocol.KEY_FILTER_MIN_CAPACITY.toLong
  // The state server computes the same hashes while it restores (native/include/ttlstate/
  // key_hash.h); a cross-language test checks them (ttlstate.tools.KeyHashes answers for Scala).
  private val Seed1 = 0x5bd1e995
  private val Seed2 = 0x1b873593

  /** The two MurmurHash3 x86_32 hashes of a key, as the state server sends them. */
  def hashes(key: Array[Byte]): (Int, Int) = {
    val k = new KeyBytes().set(key)
    (k.hashWith(Seed1), k.hashWith(Seed2))
  }
  private def hash1(key: KeyBytes): Long = key.hashWith(Seed1).toLong
  /** The probe step: odd, so the probes of a key never repeat a bit early. */
  private def hash2(key: KeyBytes): Long = (key.hashWith(Seed2) | 1).toLong

  // The executor's budget: bytes of all key filters of the JVM together.
  private val used = new AtomicLong
  @volatile private var budget: Long = ConfValues.DEFAULT_KEY_FILTER_MAX_BYTES
  private val cleaner = java.lang.ref.Cleaner.create()

  def setBudget(bytes: Long): Unit = budget = bytes
  def usedBytes: Long = used.get

  private def reserve(bytes: Long): Boolean = {
    var done = false
    var room = true
    while (!done && room) {
      val now = used.get
      room = now + bytes <= budget
      done = room && used.compareAndSet(now, now + bytes)
    }
    done
  }

  private def unreserve(bytes: Long): Unit = if (bytes != 0) used.addAndGet(-bytes)

  /** Returns a filter's bytes once, whether it is closed or collected (it must not hold the filter). */
  private final class Release(reserved: AtomicLong) extends Runnable {
    override def run(): Unit = unreserve(reserved.getAndSet(0L))
  }

  // A layer's words are in pages of 2^15 longs (256 KiB): under half of G1's smallest region
  // (1 MiB), so no page is "humongous" (placed in regions of its own, where a power-of-two
  // array and its header would waste up to a whole region).
  private val PageBits = 15
  private val PageMask = (1 << PageBits) - 1

  /** Bit `i` of a key's probes in a layer of 2^bitsLog2 bits (the layout the state server's
   *  restore sets too: native/include/ttlstate/key_hash.h). Blocked: every probe of a key falls
   *  in one block of 512 bits (8 words, one or two cache lines), chosen by h1's bits above the
   *  low 9, so a lookup costs one or two cache misses per layer instead of one per probe; within
   *  the block probe i is bit h1 + i * h2 (Kirsch-Mitzenmacher). A layer of at most 512 bits is
   *  one block. */
  def probeBit(h1: Long, h2: Long, i: Int, bitsLog2: Int): Long = {
    val blockLog2 = math.min(BlockBitsLog2, bitsLog2)
    val block = (h1 >>> BlockBitsLog2) & ((1L << (bitsLog2 - blockLog2)) - 1)
    (block << blockLog2) | ((h1 + i * h2) & ((1L << blockLog2) - 1))
  }
  private val BlockBitsLog2 = 9

  /** One Bloom filter of `capacity` keys, its probes as `probeBit` places them. Loops, not
   *  collections: this runs on every read and put. Guarded by its KeyFilter. */
  private object Layer {
    def bitsLog2(capacity: Long, index: Int): Int = {
      val bits = capacity * math.min(20, BitsPerKey + 2 * index)
      math.max(6, 64 - java.lang.Long.numberOfLeadingZeros(bits - 1))
    }
    def bytes(capacity: Long, index: Int): Long = 1L << (bitsLog2(capacity, index) - 3)
  }

  private final class Layer(val capacity: Long, index: Int) {
    val bitsLog2: Int = Layer.bitsLog2(capacity, index)
    private val wordCount = 1 << (bitsLog2 - 6)
    private val pages = Array.fill((wordCount + PageMask) >>> PageBits)(new Array[Long](math.min(wordCount, 1 << PageBits)))
    private var count = 0L

    def full: Boolean = count >= capacity
    def bytes: Long = wordCount * 8L

    def load(bits: Array[Byte], keyCount: Long, merge: Boolean): Unit = {
      require(bits.length == bytes, s"key filter: ${bits.length} bytes of bits for a layer of $bytes")
      val in = ByteBuffer.wrap(bits).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer()
      pages.foreach { p =>
        if (!merge) in.get(p)
        else { var i = 0; while (i < p.length) { p(i) |= in.get(); i += 1 } }
      }
      count = if (merge) count + keyCount else keyCount
    }

    def add(h1: Long, h2: Long): Unit = {
      var i = 0
      while (i < Hashes) {
        val bit = probeBit(h1, h2, i, bitsLog2)
        val w = (bit >>> 6).toInt
        pages(w >>> PageBits)(w & PageMask) |= 1L << (bit & 63)
        i += 1
      }
      count += 1
    }

    def contains(h1: Long, h2: Long): Boolean = {
      var all = true
      var i = 0
      while (all && i < Hashes) {
        val bit = probeBit(h1, h2, i, bitsLog2)
        val w = (bit >>> 6).toInt
        all = (pages(w >>> PageBits)(w & PageMask) & (1L << (bit & 63))) != 0
        i += 1
      }
      all
    }
  }

  /** Sized for twice the store's current keys, then growing; at most `maxKeys` keys. `owner`
   *  names the store in the log line said if it gives up. */
  def sized(generation: Long, handle: Int, lineage: Long, numKeys: Long, maxKeys: Long, owner: String): KeyFilter =
    withCapacity(generation, handle, lineage, firstCapacity(numKeys), maxKeys, owner)

  private def firstCapacity(numKeys: Long): Long = math.max(MinCapacity, 2 * numKeys)

  /** The bits (log2) of the first layer of a filter `sized` for `numKeys`: the state server
   *  sizes the bits it keeps of a restore's keys alike (a cross-language test checks it). */
  def firstLayerBitsLog2For(numKeys: Long): Int = Layer.bitsLog2(firstCapacity(numKeys), 0)

  /** A filter whose first layer holds `capacity` keys. */
  def withCapacity(generation: Long, handle: Int, lineage: Long, capacity: Long, maxKeys: Long,
      owner: String = "ttlstate store"): KeyFilter =
    new KeyFilter(generation, handle, lineage, math.max(1L, capacity), maxKeys, owner)
}
