"""The JVM <-> state server wire protocol, its spec and single definition (ttlstate.codegen emits
the constants for the shim and the native data plane at build time).

Every message is a frame: `u32 length | u8 code | payload`, big-endian, length counting the
code and payload. Requests go shim -> server; the server answers a synchronous request with
OK or ERROR, and may first send CALLBACK frames (list, fetch, publish, delete checkpoint files)
that the shim answers with CB_OK / CB_ERROR, so the store code stays synchronous while the JVM
does all remote I/O. WRITES frames carry a batch of puts and removes and get no reply; an
error in them is kept and returned by the next synchronous request on that connection.

Payload primitives: i64/i32/u32/u8 big-endian; bytes = i32 length (-1: null) + data;
str = bytes as UTF-8. `tests/unit/test_cross_language.py` checks the compiled shim's and native
module's constants against these.
"""

from __future__ import annotations

import builtins
import struct
from typing import Protocol

from ttlstate.errors import (  # noqa: F401  (re-exported: part of the wire protocol)
    ERR_BAD_REQUEST,
    ERR_CHECKPOINT,
    ERR_CONF,
    ERR_ENGINE,
    ERR_INTERNAL,
    ERR_PROTOCOL_VERSION,
    ERR_STATE,
    ERR_VERSION_NOT_FOUND,
    ProtocolError,
)

PROTOCOL_VERSION = 18
MAGIC = 0x54544C53  # "TTLS"
MAX_FRAME = 1 << 30

# Requests (shim -> server)
OP_HELLO = 1          # u32 magic, u32 version                          -> OK u32 version, str worker pid
OP_OPEN = 2           # str provider key, str confs json, str info json  -> OK u32 handle, u8 cacheable,
#                                                                          u8 key filter allowed,
#                                                                          i64 ttl ms (-1: off),
#                                                                          u8 update on read
#   cacheable = 1: within one loaded version, a repeated read of a key the shim has read or
#   written returns what the shim already knows (true unless expired values can be returned)
#   key filter allowed = 1: the shim may answer a point read "absent" without asking, when its
#   filter of the store's keys says so (false when every access must reach the server, as with
#   per-record incremental cleanup); the TTL and update type let the shim's cross-batch cache
#   apply TTL itself (it is used only where reads are cacheable and the key filter allowed)
OP_LOAD = 3           # u32 h, i64 version, i64 now ms, u8 flags         -> OK i64 lineage, i64 num keys,
#                       [, i64 snapshot version if LOAD_FROM_SNAPSHOT]      i64 now (the time TTL uses),
#                       [, str checkpoint id, str snapshot's checkpoint id
#                          ("": none) if LOAD_CHECKPOINT_ID]
#                                                                          u8 key hashes (KEY_HASHES_*)
#   flags: LOAD_READ_ONLY; LOAD_EMPTY (an empty store at `version`, whose commit makes version+1:
#   Spark's loadEmpty, for writing a whole state at a given version, as `ttlstate migrate` does);
#   LOAD_FROM_SNAPSHOT (rebuild `version` from exactly that snapshot plus the changelogs after
#   it: the state data source's snapshotStartBatchId); LOAD_KEY_HASHES (the shim will build a
#   key filter: when this load built the local DB from nothing, keep the filter's two hashes
#   of every key of this version, see native/include/ttlstate/key_hash.h, for
#   OP_KEY_FILTER_BITS, so the shim need not scan the keys back); LOAD_CHECKPOINT_ID (checkpoint
#   format 2: the version
#   Spark's commit log recorded under that id, see python/ttlstate/checkpoint/id_plan.py)
#   lineage changes whenever the local DB was rebuilt rather than advanced by this handle's own
#   commits; the shim's key filter is valid only for the lineage and version it was built for
OP_UPGRADE = 4        # u32 h                                            -> OK
OP_GET = 5            # u32 h, bytes key                                 -> OK bytes value (null: absent),
#                                                                          i64 its last-access time
OP_MULTI_GET = 6      # u32 h, u32 n, n x bytes key                      -> OK u32 n, n x bytes value
OP_WRITES = 7         # u32 h, u32 n, n x (u8 kind, bytes key[, bytes value])  (no reply)
OP_ITER = 8           # u32 h, bytes prefix (null: whole store)          -> OK u32 iter id, chunk
OP_ITER_NEXT = 9      # u32 h, u32 iter id                               -> OK chunk
OP_ITER_CLOSE = 10    # u32 h, u32 iter id                               -> OK
OP_COMMIT = 11        # u32 h                                            -> OK i64 new version, metrics,
#                                                                          str new checkpoint id,
#                                                                          str base checkpoint id
#   the ids are "" on checkpoint format 1 (and the base id for a version built on the empty state)
OP_ABORT = 12         # u32 h                                            -> OK
OP_RELEASE = 13       # u32 h                                            -> OK
OP_METRICS = 14       # u32 h                                            -> OK metrics
OP_SNAPSHOT = 15      # u32 h                                            -> OK i64 version of the
#                                                                          snapshot published (-1: none)
#   maintenance: the loaded version's snapshot when `snapshotInterval` versions passed since the
#   last (or a repair passed one over); the shim reports a published one to Spark's coordinator
OP_CLEANUP = 16       # u32 h, i32 min versions to retain                -> OK
OP_CLOSE = 17         # u32 h                                            -> OK
OP_KEYS = 18          # u32 h                                            -> OK u32 iter id, chunk
#   every key in the loaded version's local DB (expired ones included), values null; continue
#   with OP_ITER_NEXT / OP_ITER_CLOSE. Only what a filter of keys needs: no TTL, no side effects
OP_SNAPSHOT_NOW = 19  # u32 h                                            -> OK i64 version of the
#                                                                          snapshot published (-1: none)
#   writes the snapshot of the loaded version now, whatever snapshotInterval says (Spark's
#   forceSnapshotOnCommit)
OP_CHANGES = 20       # u32 h, i64 version, i64 end version,             -> OK u32 iter id, chunk
#                       str end version's checkpoint id ("": format 1),
#                       str column family ("": every record)
#   the records of the store's changelog of `version` (on format 2: the one on the lineage of
#   the end version's id), verified whole and bound to the store, those of the column family
#   only when one is named (its keys as stored, behind the family's name)
#   first, in file order: (key, u8 CHANGE_PUT + TtlValue) puts, (key, u8 CHANGE_APPEND +
#   the TtlValue of the appended bytes) appends and (key, null) deletes; continue with
#   OP_ITER_NEXT / OP_ITER_CLOSE. Needs no loaded version (the state data source's change feed)
OP_KEY_FILTER_BITS = 21  # u32 h, i64 lineage, i64 version,             -> OK bytes words (null: none)
#                          u8 bits log2, u8 probes
#   once after a LOAD of `version` on `lineage` that kept key hashes: the bits of one key filter
#   layer of 2^bits log2 bits holding every key of that version, set as the shim's filter sets
#   them (little-endian u64 words); empty while the server still scans them (ask again later);
#   null when none are kept for that version and lineage (the shim scans the keys instead).
#   After KEY_HASHES_READY the shim asks at once; after KEY_HASHES_SCANNING it asks at its next
#   loads of the store until it has them (its filter answers "might be there" for every key
#   meanwhile)
OP_SET_TIME = 22      # u32 h, i64 now ms                                -> OK i64 now (the time TTL uses)
#   Real-time Mode (`realTime.clockInterval`): moves the loaded version's "now" forward (never
#   back) while its long batch runs; the shim sends its wall clock, never below the batch time
OP_GET_ENTRIES = 23   # u32 h, u32 n, n x bytes key                      -> OK u32 n, n x (bytes value
#                                                                          (null: absent), i64 its
#                                                                          last-access time)
#   n OP_GETs in one round trip, answered in order, each with the side effects of OP_GET: the
#   shim's read-ahead of the state a chunk of input rows will read (`readAhead.chunkRows`)
OP_ENTRIES = 24       # u32 h                                            -> OK u32 iter id, chunk
#   every entry of the loaded version's local DB as stored: (key, TtlValue), its last-access
#   timestamp as it is and expired entries included; no TTL, no side effects; continue with
#   OP_ITER_NEXT / OP_ITER_CLOSE. `ttlstate repartition` moves a store's entries with it

# Range reads: RocksDB's reads of the SST files a restore opened in place on a checkpoint that
# only the shim reaches (HDFS, S3A, ...: store/in_place.py). The server's data plane connects to
# the Unix socket the shim named at OPEN (info `rangeSocket`), sends OP_HELLO, then asks on that
# connection, one request at a time; the shim's range service answers each with Hadoop's
# positional read of the file, which must lie under a checkpoint folder of a store opened so.
RANGE_READ = 100      # str file URI, i64 offset, u32 length             -> OK u8 RANGE_*, bytes
#                                                                          | ERROR ERR_CHECKPOINT
#   RANGE_DATA: the bytes (fewer only at the file's end); RANGE_MISSING: no such file (no bytes);
#   RANGE_CORRUPT: the file system's own checksums reject the file's bytes (HDFS, Hadoop's local
#   file system), the bytes its message. ERROR: the file system failed (unreachable, ...): the
#   message names the file
# The same service answers the server's checkpoint callbacks for work it does outside any
# request (a snapshot written after its commit returned): the callback as a request would carry
# it (CB_* kind, its arguments) for the files of one checkpoint folder of a store opened so.
CHECKPOINT_CALL = 101  # str folder URI, u8 CB_* kind, its arguments      -> CB_RESULT_OK | CB_RESULT_ERROR
#                                                                          | ERROR ERR_BAD_REQUEST
RANGE_DATA = 0
RANGE_MISSING = 1
RANGE_CORRUPT = 2

LOAD_READ_ONLY = 1
LOAD_EMPTY = 2
LOAD_FROM_SNAPSHOT = 4
LOAD_KEY_HASHES = 8
LOAD_CHECKPOINT_ID = 16

# What OP_LOAD says of the key hashes of the version it loaded (store/restored_keys.py)
KEY_HASHES_NONE = 0
KEY_HASHES_READY = 1
KEY_HASHES_SCANNING = 2

# Responses (server -> shim)
RESP_OK = 64
RESP_ERROR = 65       # u16 error code, str message
RESP_CALLBACK = 66    # u8 callback kind, then its arguments

# Callbacks (server -> shim, during a synchronous request)
CB_LIST = 1           # -> CB_OK u32 n, n x str name
CB_FETCH = 2          # str name, str local path -> CB_OK | CB_ERROR (missing)
CB_PUBLISH = 3        # str local path, str name -> CB_OK
CB_DELETE = 4         # u32 n, n x str name      -> CB_OK
CB_RESULT_OK = 80
CB_RESULT_ERROR = 81  # u8 error kind, str message
CB_ERR_NOT_FOUND = 1
CB_ERR_IO = 2

# Writes inside OP_WRITES
WRITE_PUT = 1
WRITE_REMOVE = 2
WRITE_PUT_NEW = 3     # a put of a key the shim's key filter proved absent from the committed
#                       store (no false negatives): the commit needs no read to count it
WRITE_REMOVE_EXPIRED = 4  # the shim's cache found the key expired: the server deletes it if it
#                       is stored and expired at its time, and counts it as expired on read
WRITE_PUT_PRESENT = 5  # a put of a key the shim's cache proved present in the committed store
#                       (a live cached entry of the loaded version): the commit needs no read
WRITE_PUT_ENTRY = 6   # a put of a whole TtlValue whose timestamp is kept as given (not the
#                       batch's now), of a key absent from the committed store: a store loaded
#                       empty that `ttlstate repartition` fills with another store's entries
WRITE_APPEND = 7      # bytes key, bytes more: the key's value becomes its stored value (none:
#                       empty) followed by `more` (a column family's ListState merge, server-side)
WRITE_REMOVE_PREFIX = 8  # bytes prefix: removes every live key starting with it (a column
#                       family's, removeColFamilyIfExists), each as WRITE_REMOVE would

# Iterator chunk: u8 done, u32 n, n x (bytes key, bytes value). Chunks hold about this much.
ITER_CHUNK_BYTES = 256 * 1024

# A store with column families (transformWithState's) keeps each family's keys behind its name:
# [FAMILY_NAME_LENGTH_BYTES big-endian name length][UTF-8 name][the family's own key bytes], so a
# family, and a prefix or an ordered range within it, is one contiguous run of the store's keys.
# Defined with the layout in store/column_families.py (the store imports nothing of the server),
# part of the wire protocol here (generated for the shim's KeyCodec.InFamily).
# The kind of a change of OP_CHANGES (a put or an append on the wire, a delete: a null value): the
# changelog record's op (checkpoint/record_format.py), part of the wire protocol here.
from ttlstate.checkpoint.record_format import OP_APPEND as CHANGE_APPEND  # noqa: E402, F401
from ttlstate.checkpoint.record_format import OP_DELETE as CHANGE_DELETE  # noqa: E402, F401
from ttlstate.checkpoint.record_format import OP_PUT as CHANGE_PUT  # noqa: E402, F401
from ttlstate.store.column_families import (  # noqa: E402, F401
    FAMILY_NAME_LENGTH_BYTES,
    FAMILY_NAME_MAX_BYTES,
    INTERNAL_FAMILY_MARKER,
)

# The shim's key filter (its cache/KeyFilter.scala): the probes a key sets in a layer, and how
# its first layer is sized. Defined with that layout in store/key_filter_layout.py, generated
# for the shim from here.
from ttlstate.store.key_filter_layout import (  # noqa: E402, F401
    KEY_FILTER_BITS_PER_KEY,
    KEY_FILTER_MIN_CAPACITY,
    KEY_FILTER_PROBES,
)

# Metrics payload: u64 num keys, u64 memory bytes, u32 n, n x (str name, i64 value)

# Error codes carried by RESP_ERROR: ERR_* (defined with the exceptions, in ttlstate.errors)

_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEAD = struct.Struct(">IB")


class Reader:
    """Sequential decoder over one frame's payload."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def u8(self) -> int:
        v = self.buf[self.pos]
        self.pos += 1
        return v

    def u16(self) -> int:
        (v,) = _U16.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def u32(self) -> int:
        (v,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def i32(self) -> int:
        (v,) = _I32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        (v,) = _I64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return v

    def bytes_or_none(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.buf):
            raise ProtocolError("frame too short for its byte string")
        v = bytes(self.buf[self.pos:end])
        self.pos = end
        return v

    def bytes(self) -> bytes:
        v = self.bytes_or_none()
        if v is None:
            raise ProtocolError("unexpected null byte string")
        return v

    def str(self) -> str:
        return self.bytes().decode("utf-8")

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)


class Writer:
    """Builds one frame's payload."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def u8(self, v: int) -> Writer:
        self.parts.append(_U8.pack(v))
        return self

    def u16(self, v: int) -> Writer:
        self.parts.append(_U16.pack(v))
        return self

    def u32(self, v: int) -> Writer:
        self.parts.append(_U32.pack(v))
        return self

    def i32(self, v: int) -> Writer:
        self.parts.append(_I32.pack(v))
        return self

    def i64(self, v: int) -> Writer:
        self.parts.append(_I64.pack(v))
        return self

    def bytes(self, v: bytes | None) -> Writer:
        if v is None:
            self.parts.append(_I32.pack(-1))
        else:
            self.parts.append(_I32.pack(len(v)))
            self.parts.append(v)
        return self

    def str(self, v: str) -> Writer:
        return self.bytes(v.encode("utf-8"))

    def payload(self) -> builtins.bytes:  # `bytes` is this class's method here
        return b"".join(self.parts)


def frame(code: int, payload: bytes = b"") -> bytes:
    return _HEAD.pack(len(payload) + 1, code) + payload


class _Reads(Protocol):
    def read(self, size: int = ..., /) -> builtins.bytes: ...


def read_frame(sock_file: _Reads) -> tuple[int, bytes] | None:
    """One frame from a buffered reader; None on a clean EOF between frames."""
    head = sock_file.read(_HEAD.size)
    if not head:
        return None
    if len(head) < _HEAD.size:
        raise ProtocolError("connection closed inside a frame header")
    length, code = _HEAD.unpack(head)
    if length < 1 or length > MAX_FRAME:
        raise ProtocolError(f"bad frame length {length}")
    payload = sock_file.read(length - 1)
    if len(payload) != length - 1:
        raise ProtocolError("connection closed inside a frame")
    return code, payload


def constants() -> dict[str, int]:
    """Every protocol constant by name, for the cross-language test."""
    return {k: v for k, v in globals().items()
            if k.isupper() and isinstance(v, int) and not k.startswith("_")}
