package ttlstate.store

import ttlstate.cache.KeyBytes
import ttlstate.client.{CheckpointFiles, PayloadReader, PayloadWriter, Protocol, ServerConnection}

/** One task's line to its store on the state server, from load until commit, abort or release.
 *
 *  Puts and removes are queued and sent as one pipelined WRITES frame (no reply) when the queue
 *  reaches `writeBatchBytes` or before any synchronous call, so the server sees them in order and
 *  a write never costs a round trip; an error in them surfaces at the next call. Calls are timed
 *  (the store's round-trip metrics). `fail` turns a failure into the task's error, naming the
 *  store, the version and the call. */
final class StoreChannel(conn: ServerConnection, worker: Int, val handle: Int, files: CheckpointFiles,
    writeBatchBytes: Int, fail: (String, Throwable) => Throwable) {
  private val writes = new PayloadWriter(1 << 16)
  private val writesHead = new PayloadWriter(8) // OP_WRITES: handle, count, then `writes`
  private var pending = 0
  private var calls = 0L
  private var nanos = 0L

  def roundTrips: Long = calls
  def roundTripMillis: Long = nanos / 1000000L
  def broken: Boolean = conn.broken

  /** A request frame's payload, starting with the store's handle. */
  def request(): PayloadWriter = new PayloadWriter().u32(handle)

  /** Queues one write: `kind` (Protocol.WRITE_*), the key, and the value if it has one. */
  def queue(kind: Int, key: KeyBytes, value: Array[Byte]): Unit = {
    writes.u8(kind).bytes(key.baseObject, key.baseOffset, key.length)
    if (value != null) writes.bytes(value)
    pending += 1
    if (writes.size >= writeBatchBytes) flush()
  }

  def flush(): Unit = if (pending > 0) {
    conn.send(Protocol.OP_WRITES, writesHead.reset().u32(handle).u32(pending), writes)
    writes.reset()
    pending = 0
  }

  /** A synchronous call, after the queued writes. */
  def call(what: String, frame: Array[Byte]): PayloadReader = {
    flush()
    val started = System.nanoTime()
    try conn.call(frame, files)
    catch { case e: Throwable => throw fail(what, e) }
    finally {
      calls += 1
      nanos += System.nanoTime() - started
    }
  }

  /** Ends the store on the server without committing (`code`: OP_ABORT or OP_RELEASE), best
   *  effort: queued writes are dropped, and a connection an interrupt closed is not used (the
   *  server already aborted what it left open when the connection dropped). */
  def endWithout(code: Int): Unit = {
    writes.reset()
    pending = 0
    if (!conn.broken) try conn.call(new PayloadWriter().u32(handle).frame(code), files) catch { case _: Exception => }
    giveBack()
  }

  /** Returns the connection to its server's pool (or closes it if broken). */
  def giveBack(): Unit = conn.server.giveBack(conn, worker)
}
