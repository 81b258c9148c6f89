package ttlstate.cache

import scala.util.Random
import scala.util.hashing.MurmurHash3

import org.apache.spark.sql.catalyst.expressions.UnsafeProjection
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.types.{LongType, StringType, StructType}
import org.apache.spark.unsafe.Platform
import org.apache.spark.unsafe.types.UTF8String
import org.scalatest.funsuite.AnyFunSuite

/** A key read where it is must hash, compare and copy as the same bytes in an array of their
 *  own: the record, the cache and the key filter index keys by these hashes, and the state
 *  server computes the key filter's (key_hash.h) from the bytes it stores. */
class KeyBytesSuite extends AnyFunSuite {
  private val ArrayBase = Platform.BYTE_ARRAY_OFFSET.toLong

  /** `key` inside a larger buffer, at `at`, with other bytes around it (as in Spark's rows). */
  private def embedded(rnd: Random, key: Array[Byte], at: Int): Array[Byte] = {
    val buf = Array.fill(at + key.length + rnd.nextInt(9))(rnd.nextInt(256).toByte)
    System.arraycopy(key, 0, buf, at, key.length)
    buf
  }

  // Scala 2.12's bytesHash mixes the last bytes differently; the shim's hash is 2.13's on both.
  private val scala213 = scala.util.Properties.versionNumberString.startsWith("2.13")

  test("the hash of bytes in place is MurmurHash3.bytesHash of them, for every length, offset and seed") {
    val rnd = new Random(7)
    (0 until 3000).foreach { n =>
      val key = Array.fill(n % 70)(rnd.nextInt(256).toByte)
      val at = rnd.nextInt(13)
      val k = new KeyBytes().set(embedded(rnd, key, at), ArrayBase + at, key.length)
      val seed = rnd.nextInt()
      if (scala213) {
        assert(k.hash == MurmurHash3.bytesHash(key), s"length ${key.length} at $at")
        assert(k.hashWith(seed) == MurmurHash3.bytesHash(key, seed))
      }
      assert(new KeyBytes().set(key).hash == k.hash)
      assert(new KeyBytes().set(key).hashWith(seed) == k.hashWith(seed))
    }
  }

  test("the key filter's hashes are the same on every Scala version (vectors of Scala 2.13's bytesHash)") {
    val vectors = Seq("00" -> (-1378060612, -1708856887), "61" -> (-946519780, -1317919703),
      "616263" -> (-1425952989, -2070330174), "61626364" -> (986616637, 442548967),
      "6162636465" -> (1429116426, 840040391), "00010203040506070809" -> (248111620, -711243403),
      "fffefd" -> (313042499, 1302329441))
    vectors.foreach { case (hex, expected) =>
      assert(KeyFilter.hashes(hex.grouped(2).map(Integer.parseInt(_, 16).toByte).toArray) == expected, hex)
    }
  }

  test("equalsAt and copyTo see exactly the bytes pointed at") {
    val rnd = new Random(8)
    (0 until 500).foreach { n =>
      val key = Array.fill(n % 40)(rnd.nextInt(256).toByte)
      val k = new KeyBytes().set(embedded(rnd, key, 5), ArrayBase + 5, key.length)
      assert(k.toArray.toSeq == key.toSeq)
      val other = embedded(rnd, key, 3)
      assert(k.equalsAt(other, 3, key.length))
      assert(!k.equalsAt(other, 3, key.length + 1))
      if (key.nonEmpty) {
        other(3 + rnd.nextInt(key.length)) = (other(3) + 1).toByte
        assert(!k.equalsAt(other, 3, key.length) || other.slice(3, 3 + key.length).sameElements(key))
      }
    }
  }

  test("a key in Spark's row finds what its copy recorded, in the task record, the cache and the key filter") {
    val schema = new StructType().add("id", StringType).add("n", LongType)
    val project = UnsafeProjection.create(schema)
    val record = new TaskRecord(1L << 20)
    val owner = HotCache.newOwner()
    val filter = KeyFilter.withCapacity(1, 1, 1, 1000, 1000000)
    val rows = (0 until 200).map(i => project(InternalRow(UTF8String.fromString(s"user-$i"), i.toLong)).copy())
    rows.foreach { row =>
      val copy = row.getBytes.clone()
      assert(record.put(new KeyBytes().set(copy), copy, 1L, true))
      filter.add(copy)
    }
    HotCache.putAll(owner, 1L, record)
    val k = new KeyBytes() // reused, as a store reuses it
    rows.foreach { row =>
      k.set(row.getBaseObject, row.getBaseOffset, row.getSizeInBytes)
      val i = record.find(k)
      assert(i >= 0 && record.key(i).sameElements(row.getBytes))
      assert(HotCache.get(owner, 1L, k).value.sameElements(row.getBytes))
      assert(filter.mightContain(k))
    }
    HotCache.removeOwner(owner)
    filter.close()
  }
}
