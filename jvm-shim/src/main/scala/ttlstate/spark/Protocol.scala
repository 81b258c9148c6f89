package ttlstate.spark

/** Wire protocol constants, mirrored from python/ttlstate/server/protocol.py (the spec lives
 *  there). tests/unit/test_cross_language.py checks every value against Python's. */
object Protocol {
  val PROTOCOL_VERSION = 3
  val MAGIC = 0x54544C53
  val MAX_FRAME: Int = 1 << 30

  val OP_HELLO = 1
  val OP_OPEN = 2
  val OP_LOAD = 3
  val OP_UPGRADE = 4
  val OP_GET = 5
  val OP_MULTI_GET = 6
  val OP_WRITES = 7
  val OP_ITER = 8
  val OP_ITER_NEXT = 9
  val OP_ITER_CLOSE = 10
  val OP_COMMIT = 11
  val OP_ABORT = 12
  val OP_RELEASE = 13
  val OP_METRICS = 14
  val OP_SNAPSHOT = 15
  val OP_CLEANUP = 16
  val OP_CLOSE = 17
  val OP_KEYS = 18

  val RESP_OK = 64
  val RESP_ERROR = 65
  val RESP_CALLBACK = 66

  val CB_LIST = 1
  val CB_FETCH = 2
  val CB_PUBLISH = 3
  val CB_DELETE = 4
  val CB_RESULT_OK = 80
  val CB_RESULT_ERROR = 81
  val CB_ERR_NOT_FOUND = 1
  val CB_ERR_IO = 2

  val WRITE_PUT = 1
  val WRITE_REMOVE = 2
  val WRITE_PUT_NEW = 3
  val WRITE_REMOVE_EXPIRED = 4

  val ITER_CHUNK_BYTES: Int = 256 * 1024

  val ERR_INTERNAL = 1
  val ERR_BAD_REQUEST = 2
  val ERR_PROTOCOL_VERSION = 3
  val ERR_CONF = 4
  val ERR_VERSION_NOT_FOUND = 5
  val ERR_CHECKPOINT = 6
  val ERR_STATE = 7
  val ERR_ENGINE = 8

  /** Every constant by name, for the cross-language test. */
  def all: Seq[(String, Long)] = Seq(
    "PROTOCOL_VERSION" -> PROTOCOL_VERSION, "MAGIC" -> MAGIC, "MAX_FRAME" -> MAX_FRAME,
    "OP_HELLO" -> OP_HELLO, "OP_OPEN" -> OP_OPEN, "OP_LOAD" -> OP_LOAD, "OP_UPGRADE" -> OP_UPGRADE,
    "OP_GET" -> OP_GET, "OP_MULTI_GET" -> OP_MULTI_GET, "OP_WRITES" -> OP_WRITES,
    "OP_ITER" -> OP_ITER, "OP_ITER_NEXT" -> OP_ITER_NEXT, "OP_ITER_CLOSE" -> OP_ITER_CLOSE,
    "OP_COMMIT" -> OP_COMMIT, "OP_ABORT" -> OP_ABORT, "OP_RELEASE" -> OP_RELEASE,
    "OP_METRICS" -> OP_METRICS, "OP_SNAPSHOT" -> OP_SNAPSHOT, "OP_CLEANUP" -> OP_CLEANUP,
    "OP_CLOSE" -> OP_CLOSE, "OP_KEYS" -> OP_KEYS, "RESP_OK" -> RESP_OK, "RESP_ERROR" -> RESP_ERROR,
    "RESP_CALLBACK" -> RESP_CALLBACK, "CB_LIST" -> CB_LIST, "CB_FETCH" -> CB_FETCH,
    "CB_PUBLISH" -> CB_PUBLISH, "CB_DELETE" -> CB_DELETE, "CB_RESULT_OK" -> CB_RESULT_OK,
    "CB_RESULT_ERROR" -> CB_RESULT_ERROR, "CB_ERR_NOT_FOUND" -> CB_ERR_NOT_FOUND,
    "CB_ERR_IO" -> CB_ERR_IO, "WRITE_PUT" -> WRITE_PUT, "WRITE_REMOVE" -> WRITE_REMOVE, "WRITE_PUT_NEW" -> WRITE_PUT_NEW,
    "WRITE_REMOVE_EXPIRED" -> WRITE_REMOVE_EXPIRED,
    "ITER_CHUNK_BYTES" -> ITER_CHUNK_BYTES, "ERR_INTERNAL" -> ERR_INTERNAL,
    "ERR_BAD_REQUEST" -> ERR_BAD_REQUEST, "ERR_PROTOCOL_VERSION" -> ERR_PROTOCOL_VERSION,
    "ERR_CONF" -> ERR_CONF, "ERR_VERSION_NOT_FOUND" -> ERR_VERSION_NOT_FOUND,
    "ERR_CHECKPOINT" -> ERR_CHECKPOINT, "ERR_STATE" -> ERR_STATE, "ERR_ENGINE" -> ERR_ENGINE
  ).map { case (k, v) => k -> v.toLong }
}
