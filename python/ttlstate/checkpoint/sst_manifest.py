"""Snapshots made of SST files: the manifest, a record file that names them.

A record-file snapshot rewrites the whole state every `snapshotInterval` versions, and a
restore rebuilds the local DB from it entry by entry. An SST snapshot instead names the local
RocksDB's own SST files (a RocksDB checkpoint of the version), each uploaded once as
`sst-<token>-<local name>` beside the store's other files and shared by every later snapshot
that still holds it: a snapshot uploads only what RocksDB wrote since the last one (the
change), and a restore copies the files and opens them, rebuilding nothing.

The manifest is a snapshot record file (kind b"S") of format version SST_MANIFEST_FORMAT, so
a ttlstate that knows only record snapshots refuses it by its format instead of reading an
empty state. Its records, sorted by key:

    b"db/<name>"   -> the bytes of a small file of the checkpoint (CURRENT, MANIFEST-*, OPTIONS-*)
    b"sst/<name>"  -> JSON {"file": its checkpoint file name, "size": bytes, "crc32": of its bytes}
    b"meta/keys"   -> the number of keys of the version, in decimal

An SST file is deleted when no snapshot left in the checkpoint names it (sst_retention.py).
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass

from ttlstate.checkpoint.record_file import (
    KIND_SNAPSHOT,
    SST_MANIFEST_FORMAT,
    RecordFileError,
    RecordFileHeader,
    write_records,
)
from ttlstate.checkpoint.record_reader import read_records

_SST_FILE = re.compile(r"^sst-[0-9a-f]+-\d+\.sst$")
_LOCAL_SST = re.compile(r"^\d+\.sst$")
_SMALL_FILE = re.compile(r"^(CURRENT|MANIFEST-\d+|OPTIONS-\d+)$")


def is_sst_file(name: str) -> bool:
    """Whether a checkpoint file name is an uploaded SST file (names.parse ignores them)."""
    return _SST_FILE.match(name) is not None


def sst_file_name(token: str, local_name: str) -> str:
    """The checkpoint name of local SST file `local_name` of the DB lineage `token`."""
    return f"sst-{token}-{local_name}"


@dataclass(frozen=True)
class SstFile:
    local: str   # its name in the local DB directory (000012.sst)
    name: str    # its name in the checkpoint
    size: int
    crc32: int   # a fetched file is checked whole before the DB opens it, as record files are


def file_crc32(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


@dataclass(frozen=True)
class SstManifest:
    ssts: tuple[SstFile, ...]
    small: tuple[tuple[str, bytes], ...]  # (local name, bytes) of CURRENT, MANIFEST-*, OPTIONS-*
    keys: int

    @property
    def names(self) -> frozenset[str]:
        return frozenset(f.name for f in self.ssts)


def split_checkpoint(directory: str) -> tuple[list[str], list[str]]:
    """The SST files and the small files of a RocksDB checkpoint directory; anything else (a
    WAL: the local DB writes none) is an error, since the snapshot would silently lack it."""
    ssts, small = [], []
    for name in sorted(os.listdir(directory)):
        if _LOCAL_SST.match(name):
            ssts.append(name)
        elif _SMALL_FILE.match(name):
            small.append(name)
        elif not (name.endswith(".log") and os.path.getsize(os.path.join(directory, name)) == 0):
            raise RecordFileError(f"RocksDB checkpoint holds an unexpected file {name}")
    return ssts, small


def write_manifest(path: str, header: bytes, manifest: SstManifest) -> int:
    records: list[tuple[bytes, bytes | None]] = [(f"db/{n}".encode(), data) for n, data in manifest.small]
    records += [(f"sst/{f.local}".encode(),
                 json.dumps({"file": f.name, "size": f.size, "crc32": f.crc32}).encode())
                for f in manifest.ssts]
    records.append((b"meta/keys", str(manifest.keys).encode()))
    return write_records(path, KIND_SNAPSHOT, header, sorted(records), fmt=SST_MANIFEST_FORMAT)


def read_manifest(path: str, header: RecordFileHeader) -> SstManifest:
    """The manifest of a verified snapshot file of format SST_MANIFEST_FORMAT."""
    if header.format != SST_MANIFEST_FORMAT:
        raise RecordFileError(f"is a record snapshot (format {header.format}), not SST files")
    ssts: list[SstFile] = []
    small: list[tuple[str, bytes]] = []
    keys = None
    try:
        for key, value in read_records(path, header):
            kind, _, local = key.decode().partition("/")
            if value is None:
                raise ValueError(f"a delete of {key!r}")
            if kind == "sst" and _LOCAL_SST.match(local):
                meta = json.loads(value)
                name, size, crc = str(meta["file"]), int(meta["size"]), int(meta["crc32"])
                if not is_sst_file(name):
                    raise ValueError(f"SST file name {name!r}")
                ssts.append(SstFile(local, name, size, crc))
            elif kind == "db" and _SMALL_FILE.match(local):
                small.append((local, value))
            elif key == b"meta/keys":
                keys = int(value)
            else:
                raise ValueError(f"record {key!r}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise RecordFileError(f"is a corrupt SST snapshot manifest ({e})") from None
    if keys is None or not any(n == "CURRENT" for n, _ in small):
        raise RecordFileError("is a corrupt SST snapshot manifest (no key count or no CURRENT)")
    return SstManifest(tuple(ssts), tuple(small), keys)
