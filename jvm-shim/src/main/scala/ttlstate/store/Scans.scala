package ttlstate.store

import ttlstate.client.{PayloadReader, Protocol}

/** A store's chunked server-side iterations (OP_ITER or OP_KEYS, then OP_ITER_NEXT).
 *
 *  A scan starts lazily, at its first `hasNext`: Spark's deduplication creates an eviction
 *  iterator every batch and, without a watermark, never reads it; starting eagerly would cost a
 *  round trip and a first chunk of TTL-checked rows per partition and batch for nothing. A
 *  scan's view must still be the store as of its creation, so a write before a scan's first
 *  `hasNext` starts every unstarted scan first (`beforeWrite`). */
final class Scans(channel: StoreChannel, isOpen: () => Boolean) {
  private var unstarted: List[Chunks] = Nil

  def open(what: String, first: Array[Byte]): Chunks = {
    val c = new Chunks(what, first)
    unstarted = c :: unstarted
    c
  }

  /** Before a write: scans created earlier must not see it. */
  def beforeWrite(): Unit = if (unstarted.nonEmpty) unstarted.reverse.foreach(_.start())

  /** One iteration: each entry is read from `reader` after `hasNext`, then `consumed()`. */
  final class Chunks private[Scans] (what: String, first: Array[Byte]) {
    var reader: PayloadReader = _
    private var iterId = 0
    private var started = false
    private var done = false
    private var remaining = 0

    private def readHeader(): Unit = { done = reader.u8() == 1; remaining = reader.u32() }

    def start(): Unit = if (!started) {
      started = true
      unstarted = unstarted.filterNot(_ eq this)
      reader = channel.call(what, first)
      iterId = reader.u32()
      readHeader()
    }

    def hasNext: Boolean = {
      start()
      while (remaining == 0 && !done) {
        reader = channel.call(what, channel.request().u32(iterId).frame(Protocol.OP_ITER_NEXT))
        readHeader()
      }
      remaining > 0
    }

    def consumed(): Unit = remaining -= 1

    def close(): Unit = {
      if (!started) { started = true; done = true; unstarted = unstarted.filterNot(_ eq this) }
      if (!done && isOpen()) {
        channel.call(what, channel.request().u32(iterId).frame(Protocol.OP_ITER_CLOSE))
        done = true
      }
    }
  }
}
