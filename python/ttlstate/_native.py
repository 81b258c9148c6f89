"""ttlstate native engine: RocksDB with the TTL compaction filter (the C ABI of native/, via ctypes).

The classes and functions the rest of ttlstate uses, with the names, arguments, results and
exceptions the engine always had; each call goes to the shared library `_native_lib` loads,
declared from the table in `_native_abi`. The classes live by job: `_native_db` (a DB and what
it hands out), `_native_txn` (a store version's transaction), `_native_connection` (the native
connection loop), `_native_filter` (one compaction filter instance, for its tests).
"""

from __future__ import annotations

from ctypes import byref, c_double, c_int, c_uint32, c_uint64
from typing import Any

from ttlstate._native_connection import Connection
from ttlstate._native_db import DB, Iterator, KeyHashes, RestoreBuilder, Snapshot
from ttlstate._native_filter import FilterHarness
from ttlstate._native_lib import (
    LIBRARY_PATH,
    MODULE_CONSTANTS,
    PROTOCOL_CONSTANTS,
    Out,
    PeerGone,
    StateError,
    decode_pairs,
    lib,
    read_value,
    scratch,
    text,
)
from ttlstate._native_txn import CleanupCursor, Scan, Txn

__all__ = ["DB", "CleanupCursor", "Connection", "FilterHarness", "Iterator", "KeyHashes", "LIBRARY_PATH",
           "PeerGone", "RestoreBuilder", "Scan", "Snapshot", "StateError", "Txn"]


STATE_DISABLED = MODULE_CONSTANTS["STATE_DISABLED"]
STATE_VALUE = MODULE_CONSTANTS["STATE_VALUE"]
STATE_LIST = MODULE_CONSTANTS["STATE_LIST"]
VALUE = MODULE_CONSTANTS["VALUE"]
MERGE_OPERAND = MODULE_CONSTANTS["MERGE_OPERAND"]
BLOB_INDEX = MODULE_CONSTANTS["BLOB_INDEX"]
KEEP = MODULE_CONSTANTS["KEEP"]
REMOVE = MODULE_CONSTANTS["REMOVE"]
CHANGE_VALUE = MODULE_CONSTANTS["CHANGE_VALUE"]
INVALID_OFFSET = MODULE_CONSTANTS["INVALID_OFFSET"]
RECORD_FORMAT_VERSION = MODULE_CONSTANTS["RECORD_FORMAT_VERSION"]


def protocol_constants() -> dict[str, int]:
    """The wire constants the native data plane was compiled with."""
    return dict(PROTOCOL_CONSTANTS)


def encode_ttl_value(ts: int, user: bytes) -> bytes:
    """The native TtlValue codec, for the cross-language test."""
    out = Out()
    lib.ttl_encode_ttl_value(ts, user, len(user), *out.refs())
    return out.bytes()


def is_expired(ts: int, ttl: int, now: int) -> bool:
    """The native expiry rule (the one the filter and the read path use), for the cross-check."""
    return bool(lib.ttl_is_expired(ts, ttl, now))


def key_hashes(key: bytes) -> tuple[int, int]:
    """The key filter's two hashes of a key, for the cross-language test."""
    h1, h2 = c_uint32(), c_uint32()
    lib.ttl_key_hashes_of(key, len(key), byref(h1), byref(h2))
    return h1.value, h2.value


def configure_memory(total_bytes: int, write_buffer_ratio: float) -> None:
    """The process-wide block cache and write-buffer budget of every DB opened afterwards."""
    lib.ttl_configure_memory(total_bytes, write_buffer_ratio)


def memory_usage() -> dict[str, Any]:
    budget, cache, buffers = c_uint64(), c_uint64(), c_uint64()
    ratio = c_double()
    lib.ttl_memory_usage(byref(budget), byref(ratio), byref(cache), byref(buffers))
    return {"budget_bytes": budget.value, "write_buffer_ratio": ratio.value,
            "block_cache_bytes": cache.value, "write_buffer_bytes": buffers.value}


def block_cache_shard_bits(capacity: int) -> int:
    """log2 of the shards of a worker's block cache of `capacity` bytes."""
    return int(lib.ttl_block_cache_shard_bits(capacity))


def release_free_memory() -> bool:
    """Hands what the allocator holds free back to the OS (glibc's malloc_trim): a batch's
    writes are freed on whichever thread ends them, and glibc keeps such memory in per-thread
    arenas, so the server's RSS would otherwise stay at its largest batch. Whether any went."""
    return bool(lib.ttl_release_free_memory())


def add_mapped_file(local: str, socket: str, uri: str, size: int) -> None:
    """Creates `local` as a placeholder of `size` bytes whose reads (by a DB opened with
    `mapped_reads`) are ranges of `uri` served by the shim's range service at `socket`."""
    lib.ttl_mapped_file_add(text(local), text(socket), text(uri), size)


def mapped_file_source(local: str) -> str | None:
    """The checkpoint file the placeholder `local` reads; None if it is not one."""
    s = scratch
    n = lib.ttl_mapped_file_source(text(local), s.buf, s.cap)
    value = s.buf[:n] if 0 <= n <= s.cap else read_value(n, s)
    return None if value is None else value.decode()


def forget_mapped_files(directory: str) -> None:
    """Forgets the placeholders created under `directory` (it is being removed)."""
    lib.ttl_mapped_files_forget(text(directory))


def take_mapped_reads(directory: str) -> tuple[int, int, int, int]:
    """Reads of the SST files in `directory` since the last call: (of checkpoint files in
    place, their bytes, of the local disk, their bytes)."""
    requests, read_bytes, local_requests, local_bytes = c_uint64(), c_uint64(), c_uint64(), c_uint64()
    lib.ttl_mapped_reads_take(text(directory), byref(requests), byref(read_bytes), byref(local_requests),
                              byref(local_bytes))
    return requests.value, read_bytes.value, local_requests.value, local_bytes.value


def evict_mapped_file(local: str, socket: str, uri: str, size: int) -> int:
    """The uploaded local SST file `local` is read from its copy `uri` from now on (through the
    range service at `socket`; empty: `uri` is a local path) and its blocks are freed; returns
    the bytes freed (0: gone, or read in place already)."""
    freed = c_uint64()
    lib.ttl_mapped_file_evict(text(local), text(socket), text(uri), size, byref(freed))
    return freed.value


def take_corruptions(directory: str) -> list[tuple[str, str]]:
    """(file, RocksDB's message) for each file of `directory` that a read or write of this
    process found corrupt since the last call."""
    out = Out()
    lib.ttl_corruptions_take(text(directory), *out.refs())
    return [(path.decode(), message.decode(errors="replace")) for path, message in decode_pairs(out.bytes())]


def mapped_reads() -> dict[str, int]:
    """Range reads of placeholders since the process started."""
    requests, read_bytes, connections = c_uint64(), c_uint64(), c_uint64()
    lib.ttl_mapped_reads(byref(requests), byref(read_bytes), byref(connections))
    return {"requests": requests.value, "bytes": read_bytes.value, "connections": connections.value}


def mapped_file_crc32(socket: str, uri: str, size: int) -> tuple[int, int] | str:
    """Reads `uri` whole through the range service: (its size, the zlib CRC-32 of its first
    `size` bytes), or what is wrong with it: missing, or rejected by its file system's checksums."""
    outcome, read_bytes, crc, out = c_int(), c_uint64(), c_uint32(), Out()
    lib.ttl_mapped_file_crc32(text(socket), text(uri), size, byref(outcome), byref(read_bytes), byref(crc),
                              *out.refs())
    return _whole_file(outcome.value, read_bytes.value, crc.value, out)


def fill_mapped_file(local: str, uri: str, crc: int) -> tuple[bool, tuple[int, int] | str] | None:
    """Fills the placeholder `local` with its checkpoint file `uri`, read whole, and reads it
    locally from then on if the copy has the CRC-32 `crc` (its snapshot's) over its size: (whether
    it does now, what was read as `mapped_file_crc32` says), or None: `local` is not (any more)
    the placeholder of `uri`."""
    read, switched, outcome = c_int(), c_int(), c_int()
    read_bytes, read_crc, out = c_uint64(), c_uint32(), Out()
    lib.ttl_mapped_file_fill(text(local), text(uri), crc, byref(read), byref(switched), byref(outcome),
                             byref(read_bytes), byref(read_crc), *out.refs())
    if not read.value:
        return None
    return bool(switched.value), _whole_file(outcome.value, read_bytes.value, read_crc.value, out)


def _whole_file(outcome: int, read_bytes: int, crc: int, out: Out) -> tuple[int, int] | str:
    if outcome == PROTOCOL_CONSTANTS["RANGE_MISSING"]:
        return "is missing"
    if outcome == PROTOCOL_CONSTANTS["RANGE_CORRUPT"]:
        return f"has bytes its file system's checksums reject ({out.bytes().decode(errors='replace')})"
    return read_bytes, crc
