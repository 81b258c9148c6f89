package ttlstate.store

import java.nio.ByteBuffer

import org.apache.spark.sql.catalyst.expressions.UnsafeRow
import org.apache.spark.unsafe.Platform

/** Several values under one key (a column family of Spark's `ListState`: `merge`, `putList`,
 *  `valuesIterator`): the stored value holds them in the order they were merged, each as its
 *  4-byte length and its bytes. One key stays one entry, so changelogs, snapshots and restores
 *  carry lists as they carry any value. */
object MultiValues {
  /** `values` as stored; appending them to a stored list (the state server's WRITE_APPEND) is
   *  appending these bytes. */
  def encode(values: Seq[Array[Byte]]): Array[Byte] = {
    val out = ByteBuffer.allocate(values.map(4 + _.length).sum)
    values.foreach(v => out.putInt(v.length).put(v))
    out.array
  }

  /** The values of `stored` as rows of `numFields` fields, pointing into it (nothing copied). */
  def rows(stored: Array[Byte], numFields: Int): Iterator[UnsafeRow] = new Iterator[UnsafeRow] {
    private var at = 0
    override def hasNext: Boolean = stored != null && at < stored.length
    override def next(): UnsafeRow = {
      if (!hasNext) throw new NoSuchElementException("end of the values")
      val length = ByteBuffer.wrap(stored, at, 4).getInt
      val row = new UnsafeRow(numFields)
      row.pointTo(stored, Platform.BYTE_ARRAY_OFFSET + at + 4, length)
      at += 4 + length
      row
    }
  }
}
