package ttlstate.cache

import java.nio.ByteOrder

import scala.util.hashing.MurmurHash3

import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.array.ByteArrayMethods

/** An encoded key where its bytes already are (Spark's row buffer, or an array), hashed once.
 *  A store looks a key up in its task's record, the executor's cache and the key filter
 *  through one of these without copying it; only what keeps the key (a record entry, a cache
 *  entry, a request) copies its bytes. Copying every key out of Spark's row and wrapping it
 *  was about 12% of what the executor's JVM allocated in a growing deduplication.
 *
 *  Mutable and reused by its one store: valid until its next `set`, and only while the row it
 *  points into is unchanged (within one store call). */
final class KeyBytes {
  private var base: AnyRef = null
  private var at = 0L
  private var len = 0
  private var h = 0

  /** Points at `length` bytes at (`base`, `offset`), as Spark's `Platform` addresses them. */
  def set(base: AnyRef, offset: Long, length: Int): KeyBytes = {
    this.base = base
    at = offset
    len = length
    h = KeyBytes.murmur3(base, offset, length, KeyBytes.Seed)
    this
  }

  def set(bytes: Array[Byte]): KeyBytes = set(bytes, Platform.BYTE_ARRAY_OFFSET.toLong, bytes.length)

  def baseObject: AnyRef = base
  def baseOffset: Long = at
  def length: Int = len

  /** Scala 2.13's `MurmurHash3.bytesHash` of these bytes: what the task record and the cache's index
   *  find keys by. */
  def hash: Int = h

  /** The MurmurHash3 of these bytes with another seed (the key filter's). */
  def hashWith(seed: Int): Int = KeyBytes.murmur3(base, at, len, seed)

  /** Whether `length` bytes of `array` from `from` are these bytes. */
  def equalsAt(array: Array[Byte], from: Int, length: Int): Boolean =
    length == len && ByteArrayMethods.arrayEquals(array, Platform.BYTE_ARRAY_OFFSET.toLong + from, base, at, len)

  /** Copies the bytes into `array` at `to`. */
  def copyTo(array: Array[Byte], to: Int): Unit =
    Platform.copyMemory(base, at, array, Platform.BYTE_ARRAY_OFFSET.toLong + to, len.toLong)

  def toArray: Array[Byte] = { val a = new Array[Byte](len); copyTo(a, 0); a }
}

object KeyBytes {
  /** The seed of Scala's `MurmurHash3.bytesHash(bytes)`: `hash` equals it (a test checks). */
  val Seed: Int = MurmurHash3.arraySeed

  private val bigEndian = ByteOrder.nativeOrder == ByteOrder.BIG_ENDIAN

  /** MurmurHash3 x86_32 of `length` bytes at (`base`, `offset`): the same as Scala 2.13's
   *  `MurmurHash3.bytesHash` of those bytes as an array (2.12's mixes the tail differently: this
   *  one, on both, is the shim's), and as the state server's key_hash.h
   *  (the key filter's hashes are cross-checked between the two), without the array. */
  def murmur3(base: AnyRef, offset: Long, length: Int, seed: Int): Int = {
    var hash = seed
    var i = 0
    while (length - i >= 4) {
      val word = Platform.getInt(base, offset + i)
      hash = MurmurHash3.mix(hash, if (bigEndian) Integer.reverseBytes(word) else word)
      i += 4
    }
    val rest = length - i
    if (rest > 0) {
      var k = Platform.getByte(base, offset + i) & 0xff
      if (rest >= 2) k |= (Platform.getByte(base, offset + i + 1) & 0xff) << 8
      if (rest == 3) k |= (Platform.getByte(base, offset + i + 2) & 0xff) << 16
      hash = MurmurHash3.mixLast(hash, k)
    }
    MurmurHash3.finalizeHash(hash, length)
  }
}

/** A key copied out of Spark's row, as a set element: equality by content, the hash computed
 *  once (`KeyBytes.hash`). For keys a store must keep past the call that read them. */
final class StoreKey(val bytes: Array[Byte], override val hashCode: Int) {
  override def equals(o: Any): Boolean = o match {
    case k: StoreKey => k.hashCode == hashCode && java.util.Arrays.equals(k.bytes, bytes)
    case _ => false
  }
}

object StoreKey {
  def of(key: KeyBytes): StoreKey = new StoreKey(key.toArray, key.hash)
}
