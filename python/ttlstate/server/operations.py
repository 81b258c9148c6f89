"""The state server's requests, one handler each, and the table the connection looks them up in.

A handler gets the connection (its iterators and open versions), the store the request names
(`OpenStore`, by the u32 handle every request after OPEN starts with) and the rest of the
payload; it returns the reply's payload or raises (a `TtlStateError` carries its wire code).
The per-entry requests of a native version never get here: the native connection loop
answers them (native/src/connection.cpp). Frame layouts: server/protocol.py.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ttlstate.checkpoint import names
from ttlstate.errors import RequestError
from ttlstate.server import protocol as P
from ttlstate.server.registry import OpenStore
from ttlstate.store import real_time_clock
from ttlstate.store.planes.base import StoreMetrics
from ttlstate.store.restored_keys import Kept

if TYPE_CHECKING:
    from ttlstate.server.worker import Connection

Handler = Callable[["Connection", OpenStore, int, P.Reader], bytes]

# What OP_LOAD's reply says of the key hashes a load kept (store/restored_keys.py).
_KEY_HASHES = {Kept.NONE: P.KEY_HASHES_NONE, Kept.READY: P.KEY_HASHES_READY,
               Kept.SCANNING: P.KEY_HASHES_SCANNING}


def metrics_payload(w: P.Writer, m: StoreMetrics) -> P.Writer:
    w.i64(m.num_keys).i64(m.memory_bytes).u32(len(m.custom))
    for name, value in m.custom.items():
        w.str(name).i64(int(value))
    return w


def hello(conn: Connection, r: P.Reader) -> bytes:
    magic, version = r.u32(), r.u32()
    if magic != P.MAGIC or version != P.PROTOCOL_VERSION:
        raise RequestError(P.ERR_PROTOCOL_VERSION,
                           f"ttlstate state server speaks protocol {P.PROTOCOL_VERSION}; the "
                           f"shim sent version {version} (magic {magic:#x}). Use the jar "
                           "that ships with the installed ttlstate package.")
    conn.greeted = True
    return P.Writer().u32(P.PROTOCOL_VERSION).str(str(os.getpid())).payload()


def open_store(conn: Connection, r: P.Reader) -> bytes:
    key, confs, info = r.str(), json.loads(r.str()), json.loads(r.str())
    handle = conn.registry.open(key, confs, info)
    ttl = conn.registry.get(handle).provider.config.ttl
    per_record = ttl.enabled and ttl.incremental is not None and ttl.incremental.per_record
    return (P.Writer().u32(handle).u8(int(not (ttl.enabled and ttl.return_expired)))
            .u8(int(not per_record)).i64(ttl.ttl_ms if ttl.ttl_ms is not None else -1)
            .u8(int(ttl.update_on_read)).payload())


def load(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    version, now, flags = r.i64(), r.i64(), r.u8()
    snapshot = r.i64() if flags & P.LOAD_FROM_SNAPSHOT else None
    watermark, previous = r.i64(), r.i64()  # the offset log's; previous < 0: unknown
    ckpt_id, snapshot_id = (r.str(), r.str()) if flags & P.LOAD_CHECKPOINT_ID else ("", "")
    conn.iters.clear()
    store = opened.provider.get_store(
        version, now_ms=now, read_only=bool(flags & P.LOAD_READ_ONLY),
        empty=bool(flags & P.LOAD_EMPTY), from_snapshot=snapshot, watermark_ms=watermark,
        previous_batch_ms=previous if previous >= 0 else None, ckpt_id=ckpt_id or None,
        snapshot_ckpt_id=snapshot_id or None)
    opened.store = store
    conn.loaded[handle] = store
    if conn.native is not None:
        store.serve_on(conn.native, handle)
    hashes = opened.provider.keep_restored_key_hashes(bool(flags & P.LOAD_KEY_HASHES))
    return (P.Writer().i64(opened.provider.lineage).i64(opened.provider.num_keys)
            .i64(store.now_ms).u8(_KEY_HASHES[hashes]).payload())


def key_filter_bits(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    lineage, version, bits_log2, probes = r.i64(), r.i64(), r.u8(), r.u8()
    try:
        words = opened.provider.take_key_filter_bits(lineage, version, bits_log2, probes)
    except ValueError as e:
        raise RequestError(P.ERR_BAD_REQUEST, str(e)) from None
    return P.Writer().bytes(words).payload()


def get(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    value, ts = conn.version(handle).get_entry(r.bytes())
    return P.Writer().bytes(value).i64(ts).payload()


def get_entries(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    version = conn.version(handle)
    entries = [version.get_entry(r.bytes()) for _ in range(r.u32())]
    w = P.Writer().u32(len(entries))
    for value, ts in entries:
        w.bytes(value).i64(ts)
    return w.payload()


def multi_get(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    keys = [r.bytes() for _ in range(r.u32())]
    values = conn.version(handle).multi_get(keys)
    w = P.Writer().u32(len(values))
    for v in values:
        w.bytes(v)
    return w.payload()


def iterate(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    prefix = r.bytes_or_none()
    store = conn.version(handle)
    return conn.start_iterator(store.iterator() if prefix is None else store.prefix_scan(prefix))


def keys(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    conn.version(handle)  # a version must be loaded
    return conn.start_iterator((k, None) for k, _ in opened.provider.engine.iterate())


def entries(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    conn.version(handle)  # a version must be loaded
    return conn.start_iterator(opened.provider.engine.iterate())


def iterator_next(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    it_id = r.u32()
    if it_id not in conn.iters:
        raise RequestError(P.ERR_STATE, f"iterator {it_id} is closed")
    return conn.chunk_payload(P.Writer(), it_id)


def iterator_close(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    conn.iters.pop(r.u32(), None)
    return b""


def upgrade(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    opened.provider.upgrade(conn.version(handle))
    return b""


def commit(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    store = conn.version(handle)
    version = store.commit()
    conn.loaded.pop(handle, None)
    conn.registry.version_ended(handle)
    if conn.native is not None:  # its batch may still be going into the local DB: no more requests
        conn.native.unbind(handle)
    new_id, base_id = opened.provider.last_commit_ids
    return (metrics_payload(P.Writer().i64(version), store.metrics())
            .str(new_id or "").str(base_id or "").payload())


def metrics(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    return metrics_payload(P.Writer(), conn.version(handle).metrics()).payload()


def abort(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    if opened.store is not None:
        opened.store.abort()
    conn.loaded.pop(handle, None)
    conn.registry.version_ended(handle)
    return b""


def release(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    if opened.store is not None:
        opened.store.release()
    conn.loaded.pop(handle, None)
    conn.registry.version_ended(handle)
    return b""


def snapshot_maintenance(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    return P.Writer().i64(_published_version(opened.provider.do_snapshot_maintenance())).payload()


def snapshot_now(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    """From maintenance, like OP_SNAPSHOT: the store's loaded version, if it has one."""
    if opened.provider.local_version is None:
        return P.Writer().i64(-1).payload()
    return P.Writer().i64(_published_version(opened.provider.write_snapshot())).payload()


def _published_version(name: str | None) -> int:
    """The version of the snapshot file `name` that was just published; -1 for none."""
    parsed = names.parse(name) if name else None
    return parsed.version if parsed is not None else -1


def changes(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    version, end_version, end_id, family = r.i64(), r.i64(), r.str(), r.str()
    records = opened.provider.changelog_records(version, (end_version, end_id) if end_id else None,
                                                family or None)
    # On the wire: (key, u8 CHANGE_PUT or CHANGE_APPEND (the record's op) + TtlValue), (key, null) deletes.
    return conn.start_iterator((key, None if value is None else bytes((op,)) + value)
                               for op, key, value in records)


def cleanup(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    opened.provider.do_cleanup_maintenance(r.i32())
    return b""


def close(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    conn.loaded.pop(handle, None)
    conn.registry.close(handle)
    return b""


def set_time(conn: Connection, opened: OpenStore, handle: int, r: P.Reader) -> bytes:
    now = real_time_clock.advance(opened.provider.engine, conn.version(handle), r.i64())
    return P.Writer().i64(now).payload()


# The requests on an open store (after HELLO and OPEN), by opcode.
STORE_REQUESTS: dict[int, Handler] = {
    P.OP_LOAD: load,
    P.OP_KEY_FILTER_BITS: key_filter_bits,
    P.OP_GET: get,
    P.OP_MULTI_GET: multi_get,
    P.OP_GET_ENTRIES: get_entries,
    P.OP_ITER: iterate,
    P.OP_KEYS: keys,
    P.OP_ENTRIES: entries,
    P.OP_ITER_NEXT: iterator_next,
    P.OP_ITER_CLOSE: iterator_close,
    P.OP_UPGRADE: upgrade,
    P.OP_COMMIT: commit,
    P.OP_METRICS: metrics,
    P.OP_ABORT: abort,
    P.OP_RELEASE: release,
    P.OP_SNAPSHOT: snapshot_maintenance,
    P.OP_SNAPSHOT_NOW: snapshot_now,
    P.OP_CHANGES: changes,
    P.OP_CLEANUP: cleanup,
    P.OP_CLOSE: close,
    P.OP_SET_TIME: set_time,
}
