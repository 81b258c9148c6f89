package ttlstate.cache

import java.nio.{ByteBuffer, ByteOrder}

import scala.util.Random

import org.scalatest.funsuite.AnyFunSuite

/** The key filter's one promise is no false negatives, across its growth, its give-up and a
 *  first layer filled from the bits the state server computes. */
class KeyFilterSuite extends AnyFunSuite {
  private def keys(n: Int, seed: Long): Seq[Array[Byte]] = {
    val rnd = new Random(seed)
    Seq.fill(n)(Array.fill(1 + rnd.nextInt(40))(rnd.nextInt(256).toByte))
  }

  /** The words of a layer of 2^bitsLog2 bits holding `loaded`, as the state server sends them
   *  (little-endian u64). */
  private def serverBits(loaded: Seq[Array[Byte]], bitsLog2: Int): Array[Byte] = {
    val words = new Array[Long](1 << (bitsLog2 - 6))
    for (k <- loaded) {
      val (h1, h2) = KeyFilter.hashes(k)
      for (i <- 0 until KeyFilter.Hashes) {
        val bit = KeyFilter.probeBit(h1.toLong, (h2 | 1).toLong, i, bitsLog2)
        words((bit >>> 6).toInt) |= 1L << (bit & 63)
      }
    }
    val bytes = ByteBuffer.allocate(words.length * 8).order(ByteOrder.LITTLE_ENDIAN)
    bytes.asLongBuffer().put(words)
    bytes.array
  }

  test("every added key is found while the filter grows layer by layer") {
    val f = KeyFilter.withCapacity(1, 1, 1, 100, 1000000)
    val added = keys(5000, 1)
    added.foreach(f.add)
    assert(f.layerCount > 1)
    assert(added.forall(f.mightContain))
    f.close()
  }

  test("few absent keys are reported present (about the configured false positive rate)") {
    val f = KeyFilter.withCapacity(1, 1, 1, 10000, 1000000)
    keys(10000, 2).foreach(f.add)
    val falsePositives = keys(10000, 3).count(f.mightContain)
    assert(falsePositives < 300, s"$falsePositives false positives of 10000")
    f.close()
  }

  test("past maxKeys it gives up, and then every key might be there") {
    val f = KeyFilter.withCapacity(1, 1, 1, 16, 50, "test store")
    keys(100, 4).foreach(f.add)
    assert(!f.active)
    assert(keys(10, 5).forall(f.mightContain))
    assert(f.memoryBytes == 0)
    f.close()
  }

  test("a first layer filled with the bits `add` would set holds those keys") {
    val model = KeyFilter.withCapacity(1, 1, 1, 1000, 1000000)
    val loaded = keys(500, 6)
    loaded.foreach(model.add)
    val bitsLog2 = model.firstLayerBitsLog2
    val rebuilt = KeyFilter.withCapacity(2, 1, 1, 1000, 1000000)
    assert(rebuilt.firstLayerBitsLog2 == bitsLog2)
    rebuilt.fillFirstLayer(serverBits(loaded, bitsLog2), loaded.size)
    assert(rebuilt.size == loaded.size)
    assert(loaded.forall(rebuilt.mightContain))
    model.close()
    rebuilt.close()
  }

  test("a layer larger than a page (2^15 words) holds its keys, added or filled from bits") {
    val capacity = 300000 // 10 bits per key: 2^22 bits, 2^16 words, two pages
    val model = KeyFilter.withCapacity(1, 1, 1, capacity, 10000000)
    assert(model.firstLayerBitsLog2 == 22)
    val added = keys(50000, 7)
    added.foreach(model.add)
    assert(added.forall(model.mightContain) && model.layerCount == 1)
    val rebuilt = KeyFilter.withCapacity(2, 1, 1, capacity, 10000000)
    rebuilt.fillFirstLayer(serverBits(added, model.firstLayerBitsLog2), added.size)
    assert(added.forall(rebuilt.mightContain))
    val absent = keys(20000, 8)
    assert(absent.count(rebuilt.mightContain) == absent.count(model.mightContain)) // the same bits
    model.close()
    rebuilt.close()
  }

  test("a filter lacking a version's keys says every key might be there, until their bits are merged") {
    val restored = keys(3000, 9)
    val f = KeyFilter.withCapacity(1, 1, 1, 6000, 1000000)
    f.lackKeysOf(7)
    assert(f.lackingVersion == 7)
    val absent = keys(2000, 10)
    assert(absent.forall(f.mightContain)) // nothing can be ruled out yet
    val written = keys(500, 11) // the batch after the restore writes these meanwhile
    written.foreach(f.add)
    val added = f.size // a key the layer already holds (a repeat, a false positive) is not counted
    assert(added > 490 && added <= 500)
    f.mergeFirstLayer(serverBits(restored, f.firstLayerBitsLog2), restored.size)
    assert(f.lackingVersion == -1 && f.size == added + 3000)
    assert(restored.forall(f.mightContain) && written.forall(f.mightContain)) // no false negative
    assert(absent.count(f.mightContain) < 100) // it rules keys out again
    f.close()
  }

  test("keyFilter.maxBytes bounds all filters together: one that would pass it gives up") {
    val base = KeyFilter.usedBytes
    try {
      KeyFilter.setBudget(base + (4 << 10)) // 4 KiB for this test
      val a = KeyFilter.withCapacity(1, 1, 1, 100, 10000000, "a") // 1,000 bits: 128 bytes
      assert(a.active && KeyFilter.usedBytes == base + a.memoryBytes && a.memoryBytes == 128)
      val b = KeyFilter.withCapacity(1, 2, 1, 1 << 20, 10000000, "b") // 10M bits: 2 MiB, over it
      assert(!b.active && b.memoryBytes == 0 && b.mightContain("anything".getBytes))
      // Layers of 100, 200, 400, 800 keys (128 B, 512 B, 1 KiB, 2 KiB), then 1,600 (4 KiB): over.
      val added = (0 until 20000).iterator.map { i => a.add(s"k$i".getBytes); i }.find(_ => !a.active)
      assert(added.exists(i => i >= 1500 && i < 1700), added) // false positives are not added again
      assert(KeyFilter.usedBytes == base) // giving up returned its bytes
      val c = KeyFilter.withCapacity(1, 3, 1, 100, 10000000, "c")
      assert(c.active)
      c.close()
      c.close() // once only
      assert(KeyFilter.usedBytes == base && c.mightContain("x".getBytes))
    } finally KeyFilter.setBudget(ttlstate.conf.ConfValues.DEFAULT_KEY_FILTER_MAX_BYTES)
  }

  test("a closed filter returns its bytes to the executor's budget") {
    val before = KeyFilter.usedBytes
    val f = KeyFilter.withCapacity(1, 1, 1, 10000, 1000000)
    assert(KeyFilter.usedBytes == before + f.memoryBytes)
    f.close()
    assert(KeyFilter.usedBytes == before)
  }
}
