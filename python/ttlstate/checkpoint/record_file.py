"""The engine-neutral record file behind changelogs and snapshots.

Either engine restores either's files, so the format is ours, not RocksDB's:

    magic     8 bytes   b"TTLSTATE"
    kind      1 byte    b"C" (changelog) or b"S" (snapshot)
    format    u16 BE    FORMAT_VERSION (1); SST_MANIFEST_FORMAT (2): a snapshot whose
                        records name SST files (see sst_manifest.py); APPENDS_FORMAT (3): a
                        changelog that holds appends. A ttlstate that does not read a format
                        refuses the file ("has format version 3") instead of misreading it
    hdr_len   u32 BE    then hdr_len bytes of UTF-8 JSON:
                        {"store": id, "version": v, "batchTimeMs": t or null,
                         "ttlMs": ttl or null, "codec": "zstd", "query": id or null,
                         "parent": state id or absent, "state": state id or absent,
                         "settings": {...} or absent, "id": checkpoint id or absent,
                         "lineage": [[version, checkpoint id], ...] or absent,
                         "parentKeys": keys of the version it was written on, or absent,
                         "keys": keys of the version it writes, or absent,
                         "parentInternalKeys", "internalKeys": of those keys, the internal
                         column families' (column_families.is_internal_key), or absent}
                        (ttlMs and settings record the TTL settings in force, for
                        `ttlstate inspect`, the state reader and the start-time warning
                        when they change; store, version and query bind the file to its
                        place: see identity.py; parent (changelogs) and state (snapshots)
                        chain the files of one timeline: see lineage.py; on checkpoint
                        format 2, id is the version's checkpoint id and lineage the ids of
                        the versions below it down to a snapshot: see id_plan.py; parentKeys
                        (changelogs) lets a replay skip the lookups that count keys for every
                        changelog but the last, and keys (changelogs whose commit knew the
                        change in keys without looking them up) for the last too; an SST
                        snapshot's internalKeys is that of the version it holds. Readers ignore
                        keys they do not know, so a key may be added without a format
                        change)
    body      zstd frame of records; a record is
                        op u8 (1 put, 2 delete, 3 append) | key_len u32 BE | key
                        | (put, append) value_len u32 BE | value
                        (value: a TtlValue; an append's: of the user bytes it appends)
    footer    b"TTLS-END" | record_count u64 BE | body_len u64 BE
              | crc32 u32 BE of every byte before the crc itself

Snapshots hold puts only, sorted by key. A changelog holds each written key once, or (a store
with column families) every put, delete and append in the order made, as Spark's RocksDB
provider logs them; a replay folds a key's records in order (changelog_fold.py). A file is
verified whole (size, footer, checksum) before a single record is applied, so a truncated or
corrupt file never loads partially.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import zstandard

from ttlstate.checkpoint.record_format import (  # noqa: F401  (re-exported: the layout's numbers)
    APPENDS_FORMAT,
    FORMAT_VERSION,
    OP_APPEND,
    OP_DELETE,
    OP_PUT,
    SST_MANIFEST_FORMAT,
)

MAGIC = b"TTLSTATE"
FOOTER_MAGIC = b"TTLS-END"
READABLE_FORMATS = (FORMAT_VERSION, SST_MANIFEST_FORMAT, APPENDS_FORMAT)
KIND_CHANGELOG = b"C"
KIND_SNAPSHOT = b"S"

# A record as most readers take it: (key, value) a put, (key, None) a delete.
Record = tuple[bytes, bytes | None]
# A record with its op: (OP_PUT, key, value), (OP_DELETE, key, None), (OP_APPEND, key, value).
Operation = tuple[int, bytes, bytes | None]

_PREFIX = struct.Struct(">8scHI")
_FOOTER = struct.Struct(">8sQQI")
_FOOTER_BODY = struct.Struct(">8sQQ")
_U32 = struct.Struct(">I")
_CHUNK = 1 << 20


class RecordFileError(ValueError):
    """The file is not a valid record file; the message says what is wrong."""


@dataclass(frozen=True)
class RecordFileHeader:
    kind: bytes
    store_id: str
    version: int
    batch_time_ms: int | None
    record_count: int
    ttl_ms: int | None = None
    query_id: str | None = None
    parent: str | None = None  # changelogs: the state id of the version it was written on
    state: str | None = None   # snapshots: the state id of the version it holds
    settings: dict[str, object] | None = None
    ckpt_id: str | None = None  # format 2: the checkpoint id of the version the file holds
    lineage: tuple[tuple[int, str], ...] | None = None  # format 2 changelogs, newest first
    crc: int = 0
    body_len: int = 0
    format: int = FORMAT_VERSION
    parent_keys: int | None = None  # changelogs: the number of keys of the version it was written on
    keys: int | None = None  # changelogs: the number of keys of the version it writes, if known
    # Of parent_keys and keys, the internal column families' keys (absent from older files).
    parent_internal_keys: int | None = None
    internal_keys: int | None = None

    @property
    def state_id(self) -> str:
        """The state id of the version this changelog wrote (see lineage.py)."""
        return self.ckpt_id or self.fingerprint

    @property
    def fingerprint(self) -> str:
        """This file's content id: equal for byte-identical files (a deterministic re-run)."""
        return fingerprint(self.crc, self.body_len)


def fingerprint(crc: int, body_len: int) -> str:
    return f"{crc:08x}.{body_len:x}"


def file_fingerprint(path: str) -> str:
    """The fingerprint of a record file just written here, read from its footer alone."""
    with open(path, "rb") as f:
        f.seek(-_FOOTER.size, os.SEEK_END)
        fmagic, _count, body_len, crc = _FOOTER.unpack(f.read(_FOOTER.size))
    if fmagic != FOOTER_MAGIC:
        raise RecordFileError("is truncated or corrupt (no end marker)")
    return fingerprint(crc, body_len)


class _CrcWriter:
    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.crc = 0
        self.size = 0

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)


def write_record_file(path: str, kind: bytes, store_id: str, version: int,
                      batch_time_ms: int | None,
                      records: Iterable[Record], ttl_ms: int | None = None,
                      query_id: str | None = None, **lineage: Any) -> int:
    """Write records ((key, value) puts, (key, None) deletes); returns the record count.
    `lineage`: the optional header keys of `header_json` (parent, state, settings)."""
    return write_records(path, kind, header_json(store_id, version, batch_time_ms, ttl_ms, query_id,
                                                 **lineage), records)


def write_records(path: str, kind: bytes, header: bytes,
                  records: Iterable[Record], fmt: int = FORMAT_VERSION) -> int:
    """`write_record_file` with the header's JSON already made (`header_json`)."""
    return _write(path, kind, header, fmt,
                  ((OP_PUT, k, v) if v is not None else (OP_DELETE, k, None) for k, v in records))


def write_operations(path: str, kind: bytes, header: bytes, operations: Sequence[Operation]) -> int:
    """A changelog of operations in order: of APPENDS_FORMAT when one is an append (a ttlstate
    without appends refuses it), else of FORMAT_VERSION, which any ttlstate reads."""
    fmt = APPENDS_FORMAT if any(op == OP_APPEND for op, _, _ in operations) else FORMAT_VERSION
    return _write(path, kind, header, fmt, iter(operations))


def _write(path: str, kind: bytes, header: bytes, fmt: int, operations: Iterator[Operation]) -> int:
    count = 0
    with open(path, "wb") as raw:
        out = _CrcWriter(raw)
        out.write(_PREFIX.pack(MAGIC, kind, fmt, len(header)) + header)
        body_start = out.size
        comp = zstandard.ZstdCompressor(level=3).compressobj()
        buf: list[bytes] = []
        buffered = 0
        for op, key, value in operations:
            if value is None:
                rec = b"".join((bytes((op,)), _U32.pack(len(key)), key))
            else:
                rec = b"".join((bytes((op,)), _U32.pack(len(key)), key, _U32.pack(len(value)), value))
            buf.append(rec)
            buffered += len(rec)
            count += 1
            if buffered >= _CHUNK:
                out.write(comp.compress(b"".join(buf)))
                buf.clear()
                buffered = 0
        out.write(comp.compress(b"".join(buf)) + comp.flush())
        body_len = out.size - body_start
        footer = _FOOTER_BODY.pack(FOOTER_MAGIC, count, body_len)
        raw.write(footer + struct.pack(">I", zlib.crc32(footer, out.crc)))
        raw.flush()
        os.fsync(raw.fileno())
    return count


def header_json(store_id: str, version: int, batch_time_ms: int | None, ttl_ms: int | None,
                query_id: str | None, *, parent: str | None = None, state: str | None = None,
                settings: dict[str, object] | None = None, ckpt_id: str | None = None,
                lineage: list[tuple[int, str]] | None = None, parent_keys: int | None = None,
                keys: int | None = None, parent_internal_keys: int | None = None,
                internal_keys: int | None = None) -> bytes:
    """The header's JSON (the native writer is handed these bytes, so the layout lives here)."""
    meta: dict[str, object] = {"store": store_id, "version": version, "batchTimeMs": batch_time_ms,
                               "ttlMs": ttl_ms, "codec": "zstd"}
    optional = {"query": query_id, "parent": parent, "state": state, "settings": settings,
                "id": ckpt_id, "lineage": None if lineage is None else [list(e) for e in lineage],
                "parentKeys": parent_keys, "keys": keys, "parentInternalKeys": parent_internal_keys,
                "internalKeys": internal_keys}
    meta.update({k: v for k, v in optional.items() if v is not None})
    return json.dumps(meta).encode()


def verify_record_file(path: str, expected_kind: bytes) -> RecordFileHeader:
    """Check size, magic, footer and checksum of the whole file; raise RecordFileError if bad."""
    size = os.path.getsize(path)
    if size < _PREFIX.size + _FOOTER.size:
        raise RecordFileError(f"is truncated ({size} bytes)")
    with open(path, "rb") as f:
        magic, kind, fmt, hdr_len = _PREFIX.unpack(f.read(_PREFIX.size))
        if magic != MAGIC:
            raise RecordFileError("is not a ttlstate checkpoint file (bad magic)")
        if fmt not in READABLE_FORMATS or (fmt == SST_MANIFEST_FORMAT and kind != KIND_SNAPSHOT) or \
                (fmt == APPENDS_FORMAT and kind != KIND_CHANGELOG):
            raise RecordFileError(f"has format version {fmt}; this ttlstate reads "
                                  f"{', '.join(map(str, READABLE_FORMATS))} (2: snapshots only, "
                                  "3: changelogs only)")
        if kind != expected_kind:
            raise RecordFileError(f"has kind {kind!r}, expected {expected_kind!r}")
        f.seek(size - _FOOTER.size)
        fmagic, count, body_len, crc = _FOOTER.unpack(f.read(_FOOTER.size))
        if fmagic != FOOTER_MAGIC:
            raise RecordFileError("is truncated or corrupt (no end marker)")
        if _PREFIX.size + hdr_len + body_len + _FOOTER.size != size:
            raise RecordFileError("is truncated or corrupt (sizes do not add up)")
        f.seek(0)
        remaining = size - _FOOTER.size
        actual = 0
        head = b""
        while remaining:
            chunk = f.read(min(_CHUNK, remaining))
            if not chunk:
                raise RecordFileError("is truncated")
            if len(head) < _PREFIX.size + hdr_len:
                head += chunk[: _PREFIX.size + hdr_len - len(head)]
            actual = zlib.crc32(chunk, actual)
            remaining -= len(chunk)
        actual = zlib.crc32(_FOOTER_BODY.pack(fmagic, count, body_len), actual)
        if actual != crc:
            raise RecordFileError("is corrupt (checksum mismatch)")
    try:
        meta = json.loads(head[_PREFIX.size:])
        settings = meta.get("settings")
        lineage = meta.get("lineage")
        return RecordFileHeader(kind, str(meta["store"]), int(meta["version"]),
                                meta.get("batchTimeMs"), count, meta.get("ttlMs"), meta.get("query"),
                                meta.get("parent"), meta.get("state"),
                                settings if isinstance(settings, dict) else None, meta.get("id"),
                                None if lineage is None else tuple((int(v), str(i)) for v, i in lineage),
                                crc, body_len, fmt,
                                _optional_int(meta, "parentKeys"), _optional_int(meta, "keys"),
                                _optional_int(meta, "parentInternalKeys"),
                                _optional_int(meta, "internalKeys"))
    except (ValueError, KeyError, TypeError) as e:
        raise RecordFileError(f"has a bad header ({e})") from None


def header_of(head: bytes) -> tuple[bytes, dict[str, object]]:
    """(kind, header JSON) from a file's first bytes (its prefix and header, not verified
    further): what a reader without the whole file, such as a remote one, learns of it."""
    if len(head) < _PREFIX.size:
        raise RecordFileError(f"is truncated ({len(head)} bytes)")
    magic, kind, _fmt, hdr_len = _PREFIX.unpack_from(head)
    if magic != MAGIC:
        raise RecordFileError("is not a ttlstate checkpoint file (bad magic)")
    if len(head) < _PREFIX.size + hdr_len:
        raise RecordFileError(f"has a header of {hdr_len} bytes beyond the {len(head)} read")
    try:
        meta = json.loads(head[_PREFIX.size:_PREFIX.size + hdr_len])
    except ValueError as e:
        raise RecordFileError(f"has a bad header ({e})") from None
    if not isinstance(meta, dict):
        raise RecordFileError("has a bad header (not a JSON object)")
    return kind, meta


def header_bytes_needed(head: bytes) -> int:
    """How many of a file's first bytes `header_of` needs, from at least its prefix."""
    return _PREFIX.size + _PREFIX.unpack_from(head)[3]


def intact_length(path: str) -> int | None:
    """When bytes were appended after the end of a record file (another writer, a copy tool that
    appended instead of replacing): the length of the record file it starts with, found by its
    last footer whose sizes add up and whose checksum holds; None when there is no such file.
    Everything up to that length is verified as a whole file is; what follows is not the file's."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(_PREFIX.size)
        if len(head) < _PREFIX.size or head[:8] != MAGIC:
            return None
        hdr_len = _PREFIX.unpack(head)[3]
        pos = size
        while pos > _PREFIX.size + hdr_len:  # from the end back, a chunk at a time
            start = max(_PREFIX.size + hdr_len, pos - _CHUNK)
            f.seek(start)
            window = f.read(min(pos + len(FOOTER_MAGIC), size) - start)
            at = window.rfind(FOOTER_MAGIC)
            while at >= 0:
                end = start + at + _FOOTER.size
                if end < size:
                    f.seek(start + at)
                    fmagic, count, body_len, crc = _FOOTER.unpack(f.read(_FOOTER.size))
                    if _PREFIX.size + hdr_len + body_len + _FOOTER.size == end and \
                            _crc_upto(f, start + at, _FOOTER_BODY.pack(fmagic, count, body_len)) == crc:
                        return end
                at = window.rfind(FOOTER_MAGIC, 0, at)
            pos = start
    return None


def _crc_upto(f: BinaryIO, length: int, tail: bytes) -> int:
    """The CRC32 of the first `length` bytes of `f`, then `tail`."""
    f.seek(0)
    crc, remaining = 0, length
    while remaining:
        chunk = f.read(min(_CHUNK, remaining))
        if not chunk:
            break
        crc = zlib.crc32(chunk, crc)
        remaining -= len(chunk)
    return zlib.crc32(tail, crc)


def _optional_int(meta: dict[str, object], key: str) -> int | None:
    value = meta.get(key)
    return None if value is None else int(value)  # type: ignore[call-overload]
