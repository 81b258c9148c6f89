"""Reading a record file's body (the layout: record_file.py) once `verify_record_file` has
accepted the whole file: streamed, a chunk at a time, so a large snapshot never sits in memory."""

from __future__ import annotations

import os
from collections.abc import Iterator

import zstandard

from ttlstate.checkpoint.record_file import (
    _CHUNK,
    _FOOTER,
    _PREFIX,
    _U32,
    APPENDS_FORMAT,
    OP_APPEND,
    OP_DELETE,
    OP_PUT,
    Operation,
    Record,
    RecordFileError,
    RecordFileHeader,
)
from ttlstate.ttl.ttl_value import TIMESTAMP_SIZE


def read_records(path: str, header: RecordFileHeader) -> Iterator[Record]:
    """Records of a file of puts and deletes that `verify_record_file` accepted, in file order; an
    append is refused as corrupt (a changelog, which may hold some, is read by `read_operations`)."""
    for op, key, value in read_operations(path, header):
        if op == OP_APPEND:
            raise RecordFileError("is corrupt (an append record in a file of puts and deletes)")
        yield key, value


def read_operations(path: str, header: RecordFileHeader) -> Iterator[Operation]:
    """The records of a file that `verify_record_file` accepted with their ops, in file order."""
    with open(path, "rb") as f:
        hdr_len = _PREFIX.unpack(f.read(_PREFIX.size))[3]
        size = os.fstat(f.fileno()).st_size
        f.seek(_PREFIX.size + hdr_len)
        body_remaining = size - _FOOTER.size - _PREFIX.size - hdr_len
        dec = zstandard.ZstdDecompressor().decompressobj()
        pending = b""
        pos = 0
        seen = 0
        appends = header.format == APPENDS_FORMAT
        while True:
            if body_remaining:
                chunk = f.read(min(_CHUNK, body_remaining))
                body_remaining -= len(chunk)
                pending = pending[pos:] + dec.decompress(chunk)
                pos = 0
            # Parse every complete record in `pending`.
            while True:
                rec = _parse_one(pending, pos, appends)
                if rec is None:
                    break
                pos, op, key, value = rec
                seen += 1
                yield op, key, value
            if not body_remaining:
                break
        if pos != len(pending) or seen != header.record_count:
            raise RecordFileError(f"is corrupt (decoded {seen} records, footer says "
                                  f"{header.record_count})")


def _parse_one(buf: bytes, pos: int, appends: bool) -> tuple[int, int, bytes, bytes | None] | None:
    if pos + 5 > len(buf):
        return None
    op = buf[pos]
    (klen,) = _U32.unpack_from(buf, pos + 1)
    kend = pos + 5 + klen
    if op == OP_DELETE:
        if kend > len(buf):
            return None
        return kend, op, buf[pos + 5:kend], None
    if op != OP_PUT and not (op == OP_APPEND and appends):
        raise RecordFileError(f"is corrupt (unknown record op {op})")
    if kend + 4 > len(buf):
        return None
    (vlen,) = _U32.unpack_from(buf, kend)
    vend = kend + 4 + vlen
    if op == OP_APPEND and vlen < TIMESTAMP_SIZE:
        raise RecordFileError(f"is corrupt (an append of {vlen} bytes, without a timestamp)")
    return None if vend > len(buf) else (vend, op, buf[pos + 5:kend], buf[kend + 4:vend])
