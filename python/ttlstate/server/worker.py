"""A state server worker: owns a shard of the executor's stores and serves them on one socket.

`python -m ttlstate.server.worker --socket PATH --root DIR`. It exits when its stdin reaches
EOF (its supervisor, or the JVM, is gone), so a worker never outlives the executor. Each
connection is served by its own thread; a store lives in exactly one worker.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import socketserver
import struct
import sys
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound
from ttlstate.checkpoint.identity import store_label
from ttlstate.config import keys as K
from ttlstate.config.parse import ConfError
from ttlstate.config.store_config import MemoryConfig, store_config_from_confs
from ttlstate.engine.select import EngineUnavailable
from ttlstate.server import protocol as P
from ttlstate.server import store_log
from ttlstate.server.remote_checkpoint import RemoteCheckpointLocation, set_current_channel
from ttlstate.server.ttl_scope import ttl_applies
from ttlstate.store import real_time_clock
from ttlstate.store.provider import StoreProvider
from ttlstate.store.state_store import StateStore, StoreMetrics, StoreStateError

try:
    from ttlstate import _native
    from ttlstate.store.native_state_store import NativeStateStore
except ImportError:  # the portable build: the Python loop and data plane serve everything
    _native = None  # type: ignore[assignment]
    NativeStateStore = None  # type: ignore[assignment,misc]

log = logging.getLogger("ttlstate.server")


class JvmCheckpointIOError(OSError):
    """The JVM could not do a checkpoint file operation (remote I/O failed, or the task was
    interrupted because the query stopped): the request fails, but it is not our bug."""


class RequestError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Entry:
    key: str
    provider: StoreProvider
    local_dir: str
    store: StateStore | NativeStateStore | None = None


class Registry:
    """The providers of this worker, by handle; shared by all connections."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._by_key: dict[str, int] = {}
        self._entries: dict[int, Entry] = {}
        self._next = 1
        self._memory: MemoryConfig | None = None

    def open(self, key: str, confs: dict[str, str], info: dict[str, object]) -> int:
        with self._lock:
            handle = self._by_key.get(key)
            if handle is not None:
                return handle
            operator_id = int(info.get("operatorId", -1))  # type: ignore[arg-type]
            config = store_config_from_confs(confs, operator_id, store_log.operator_names(info))
            self._apply_memory(config.memory)
            if not ttl_applies(str(info.get("storeName", "default")), str(info.get("keySchema", "")),
                               str(info.get("valueSchema", ""))):
                config = replace(config, ttl=config.ttl.disabled())
            store_log.log_store_opened(info, config)
            handle = self._next
            self._next += 1
            local = os.path.join(self.root, f"{handle}-{re.sub(r'[^A-Za-z0-9_.-]', '_', key)[-80:]}")
            store_id = store_label(info.get("operatorId", "?"), info.get("partitionId", "?"),  # type: ignore[arg-type]
                                   str(info.get("storeName", "default")))
            query = info.get("queryId")
            location = RemoteCheckpointLocation(str(info.get("checkpointDir", "")))
            provider = StoreProvider(store_id, local, location, config,
                                     query_id=str(query) if query else None,
                                     checkpoint_ids=bool(info.get("checkpointIds", False)),
                                     reader=bool(info.get("stateReader", False)))
            self._by_key[key] = handle
            self._entries[handle] = Entry(key, provider, local)
            return handle

    def _apply_memory(self, memory: MemoryConfig) -> None:
        """One block cache and write-buffer budget for all of this worker's stores."""
        if _native is None or self._memory == memory:
            return
        if self._memory is not None:
            log.warning("ttlstate server: %s changed to %d bytes (ratio %s); the worker's shared "
                        "RocksDB memory is resized", K.MEMORY_MAX_BYTES.key, memory.max_bytes,
                        memory.write_buffer_ratio)
        _native.configure_memory(memory.max_bytes, memory.write_buffer_ratio)
        self._memory = memory

    def get(self, handle: int) -> Entry:
        entry = self._entries.get(handle)
        if entry is None:
            raise RequestError(P.ERR_STATE, f"unknown store handle {handle} (closed or never opened)")
        return entry

    def close(self, handle: int) -> None:
        with self._lock:
            entry = self._entries.pop(handle, None)
            if entry is None:
                return
            self._by_key.pop(entry.key, None)
        entry.provider.close()
        shutil.rmtree(entry.local_dir, ignore_errors=True)


def _error_code(e: BaseException) -> int:
    if isinstance(e, RequestError):
        return e.code
    if isinstance(e, ConfError):
        return P.ERR_CONF
    if isinstance(e, VersionNotFound):
        return P.ERR_VERSION_NOT_FOUND
    if isinstance(e, (CheckpointError, JvmCheckpointIOError)):
        return P.ERR_CHECKPOINT
    if isinstance(e, StoreStateError):
        return P.ERR_STATE
    if isinstance(e, EngineUnavailable):
        return P.ERR_ENGINE
    if isinstance(e, P.ProtocolError):
        return P.ERR_BAD_REQUEST
    return P.ERR_INTERNAL


def _error_payload(e: BaseException) -> bytes:
    """A failed pipelined write, owed to the next synchronous request of the connection."""
    return P.Writer().u16(_error_code(e)).str(f"an earlier pipelined write failed: {e}").payload()


def _metrics_payload(w: P.Writer, m: StoreMetrics) -> P.Writer:
    w.i64(m.num_keys).i64(m.memory_bytes).u32(len(m.custom))
    for name, value in m.custom.items():
        w.str(name).i64(int(value))
    return w


_GET_HEAD = struct.Struct(">Ii")
_OK_BYTES = struct.Struct(">IBi")
_TS = struct.Struct(">q")
_NULL_RESPONSE = _OK_BYTES.pack(13, P.RESP_OK, -1) + _TS.pack(0)


class Connection(socketserver.StreamRequestHandler):
    """One shim connection: a loop of frames, answered in order.

    With the native extension, the loop itself is native (`_native.Connection`): it answers the
    per-entry requests of stores on the native data plane without entering Python, and calls
    `_forward` for everything else (the control plane, and stores of the portable engine).
    Without it, `_serve_python` is the same loop in Python.
    """

    rbufsize = 1 << 16
    registry: Registry

    def setup(self) -> None:
        super().setup()
        self.pending_error: BaseException | None = None
        self.iters: dict[int, Iterator[tuple[bytes, bytes | None]]] = {}
        self.next_iter = 1
        self.greeted = False
        # The versions this connection loaded and has not ended: aborted if it drops.
        self.loaded: dict[int, StateStore | NativeStateStore] = {}
        self.native = _native.Connection(self.request.fileno()) if _native is not None else None

    def send(self, code: int, payload: bytes = b"") -> None:
        if self.native is not None:
            self.native.send(code, payload)
            return
        self.wfile.write(P.frame(code, payload))
        self.wfile.flush()

    def _read_frame(self) -> tuple[int, bytes] | None:
        if self.native is not None:
            return self.native.read_frame()
        return P.read_frame(self.rfile)

    def callback(self, kind: int, payload: bytes) -> P.Reader:
        self.send(P.RESP_CALLBACK, bytes((kind,)) + payload)
        got = self._read_frame()
        if got is None:
            raise P.ProtocolError("shim closed the connection during a callback")
        code, body = got
        if code == P.CB_RESULT_OK:
            return P.Reader(body)
        if code == P.CB_RESULT_ERROR:
            r = P.Reader(body)
            err_kind, message = r.u8(), r.str()
            if err_kind == P.CB_ERR_NOT_FOUND:
                raise FileNotFoundError(message)
            raise JvmCheckpointIOError(f"checkpoint I/O failed in the JVM: {message}")
        raise P.ProtocolError(f"expected a callback result, got frame code {code}")

    def handle(self) -> None:
        set_current_channel(self)
        try:
            if self.native is not None:
                self.native.serve(self._forward)
            else:
                self._serve_python()
        finally:
            set_current_channel(None)
            self._abort_open_versions()

    def _abort_open_versions(self) -> None:
        """The shim dropped the connection (its task was interrupted or killed, its executor
        died): the versions it loaded and neither committed nor ended are aborted, as its
        `abort()` would, so nothing of the batch can be committed later. A half-received frame
        was never applied. A version some other connection loaded since is not this one's
        (abort is a no-op on superseded, committed and ended versions)."""
        for store in self.loaded.values():
            try:
                store.abort()
            except Exception:  # the connection is gone either way; the next load supersedes it
                log.warning("ttlstate server: aborting a dropped connection's open version failed\n%s",
                            traceback.format_exc())
        self.loaded.clear()

    def _forward(self, code: int, payload: bytes) -> tuple[int, bytes] | None:
        """What the native loop does not answer itself. None: a pipelined frame, no reply."""
        if code == P.OP_WRITES:
            self._writes(P.Reader(payload))
            if self.pending_error is None:
                return None
            e, self.pending_error = self.pending_error, None
            return P.RESP_ERROR, _error_payload(e)
        return self._answer(code, payload)

    def _answer(self, code: int, payload: bytes) -> tuple[int, bytes]:
        try:
            return P.RESP_OK, self.dispatch(code, P.Reader(payload))
        except Exception as e:  # every failure becomes an error frame, never a hang
            if _error_code(e) == P.ERR_INTERNAL and not isinstance(e, ConnectionError):
                log.error("ttlstate server: request %d failed\n%s", code, traceback.format_exc())
            return P.RESP_ERROR, P.Writer().u16(_error_code(e)).str(str(e) or type(e).__name__).payload()

    def _serve_python(self) -> None:
        while True:
            got = P.read_frame(self.rfile)
            if got is None:
                return
            code, payload = got
            if code == P.OP_WRITES:
                self._writes(P.Reader(payload))
                continue
            try:
                if code == P.OP_GET and self.pending_error is None:
                    try:
                        self.request.sendall(self._fast_get(payload))
                    except (BrokenPipeError, ConnectionResetError):
                        raise
                    except Exception as e:
                        self.send(P.RESP_ERROR, P.Writer().u16(_error_code(e)).str(str(e)).payload())
                    continue
                if self.pending_error is not None:
                    e, self.pending_error = self.pending_error, None
                    self.send(P.RESP_ERROR, _error_payload(e))
                    continue
                self.send(*self._answer(code, payload))
            except (BrokenPipeError, ConnectionResetError):
                return

    def _fast_get(self, payload: bytes) -> bytes:
        """The hot path (one per dedup row): no Reader/Writer objects, one response buffer."""
        handle, klen = _GET_HEAD.unpack_from(payload)
        store = self.registry.get(handle).store
        if store is None or klen < 0 or len(payload) != 8 + klen:
            raise RequestError(P.ERR_BAD_REQUEST, "malformed GET")
        value, ts = store.get_entry(payload[8:])
        if value is None:
            return _NULL_RESPONSE
        return _OK_BYTES.pack(len(value) + 13, P.RESP_OK, len(value)) + value + _TS.pack(ts)

    def _writes(self, r: P.Reader) -> None:
        if self.pending_error is not None:
            return
        try:
            store = self._store(r.u32())
            for _ in range(r.u32()):
                kind = r.u8()
                key = r.bytes()
                if kind in (P.WRITE_PUT, P.WRITE_PUT_NEW, P.WRITE_PUT_PRESENT):
                    store.put(key, r.bytes())
                elif kind == P.WRITE_REMOVE:
                    store.remove(key)
                elif kind == P.WRITE_REMOVE_EXPIRED:
                    store.remove_if_expired(key)
                else:
                    raise P.ProtocolError(f"unknown write kind {kind}")
        except Exception as e:
            self.pending_error = e

    def _store(self, handle: int) -> StateStore | NativeStateStore:
        store = self.registry.get(handle).store
        if store is None:
            raise RequestError(P.ERR_STATE, f"store handle {handle} has no loaded version")
        return store

    def _chunk(self, it: Iterator[tuple[bytes, bytes | None]]
               ) -> tuple[bool, list[tuple[bytes, bytes | None]]]:
        out: list[tuple[bytes, bytes | None]] = []
        size = 0
        for key, value in it:
            out.append((key, value))
            size += len(key) + (len(value) if value is not None else 0) + 8
            if size >= P.ITER_CHUNK_BYTES:
                return False, out
        return True, out

    def _chunk_payload(self, w: P.Writer, it_id: int) -> bytes:
        done, pairs = self._chunk(self.iters[it_id])
        if done:
            del self.iters[it_id]
        w.u8(int(done)).u32(len(pairs))
        for k, v in pairs:
            w.bytes(k).bytes(v)
        return w.payload()

    def dispatch(self, code: int, r: P.Reader) -> bytes:
        if code == P.OP_HELLO:
            magic, version = r.u32(), r.u32()
            if magic != P.MAGIC or version != P.PROTOCOL_VERSION:
                raise RequestError(P.ERR_PROTOCOL_VERSION,
                                   f"ttlstate state server speaks protocol {P.PROTOCOL_VERSION}; the "
                                   f"shim sent version {version} (magic {magic:#x}). Use the jar "
                                   "that ships with the installed ttlstate package.")
            self.greeted = True
            return P.Writer().u32(P.PROTOCOL_VERSION).str(str(os.getpid())).payload()
        if not self.greeted:
            raise RequestError(P.ERR_PROTOCOL_VERSION, "first frame must be HELLO")
        if code == P.OP_OPEN:
            key, confs, info = r.str(), json.loads(r.str()), json.loads(r.str())
            handle = self.registry.open(key, confs, info)
            ttl = self.registry.get(handle).provider.config.ttl
            per_record = ttl.enabled and ttl.incremental is not None and ttl.incremental.per_record
            return (P.Writer().u32(handle).u8(int(not (ttl.enabled and ttl.return_expired)))
                    .u8(int(not per_record)).i64(ttl.ttl_ms if ttl.ttl_ms is not None else -1)
                    .u8(int(ttl.update_on_read)).payload())
        handle = r.u32()
        entry = self.registry.get(handle)
        if code == P.OP_LOAD:
            version, now, flags = r.i64(), r.i64(), r.u8()
            snapshot = r.i64() if flags & P.LOAD_FROM_SNAPSHOT else None
            watermark, previous = r.i64(), r.i64()  # the offset log's; previous < 0: unknown
            ckpt_id, snapshot_id = (r.str(), r.str()) if flags & P.LOAD_CHECKPOINT_ID else ("", "")
            self.iters.clear()
            entry.store = entry.provider.get_store(
                version, now_ms=now, read_only=bool(flags & P.LOAD_READ_ONLY),
                empty=bool(flags & P.LOAD_EMPTY), from_snapshot=snapshot, watermark_ms=watermark,
                previous_batch_ms=previous if previous >= 0 else None, ckpt_id=ckpt_id or None,
                snapshot_ckpt_id=snapshot_id or None)
            self.loaded[handle] = entry.store
            if self.native is not None and isinstance(entry.store, NativeStateStore):
                self.native.bind(handle, entry.store.txn)  # its per-entry requests stay native
            hashes = entry.provider.keep_restored_key_hashes(bool(flags & P.LOAD_KEY_HASHES))
            return (P.Writer().i64(entry.provider.lineage).i64(entry.provider.num_keys)
                    .i64(entry.store.now_ms).u8(int(hashes)).payload())
        if code == P.OP_KEY_FILTER_BITS:
            bits_log2, probes = r.u8(), r.u8()
            try:
                words = entry.provider.take_key_filter_bits(bits_log2, probes)
            except ValueError as e:
                raise RequestError(P.ERR_BAD_REQUEST, str(e)) from None
            return P.Writer().bytes(words).payload()
        if code == P.OP_GET:
            value, ts = self._store(handle).get_entry(r.bytes())
            return P.Writer().bytes(value).i64(ts).payload()
        if code == P.OP_GET_ENTRIES:
            store = self._store(handle)
            entries = [store.get_entry(r.bytes()) for _ in range(r.u32())]
            w = P.Writer().u32(len(entries))
            for value, ts in entries:
                w.bytes(value).i64(ts)
            return w.payload()
        if code == P.OP_MULTI_GET:
            keys = [r.bytes() for _ in range(r.u32())]
            values = self._store(handle).multi_get(keys)
            w = P.Writer().u32(len(values))
            for v in values:
                w.bytes(v)
            return w.payload()
        if code == P.OP_ITER:
            prefix = r.bytes_or_none()
            store = self._store(handle)
            it_id = self.next_iter
            self.next_iter += 1
            self.iters[it_id] = store.iterator() if prefix is None else store.prefix_scan(prefix)
            return self._chunk_payload(P.Writer().u32(it_id), it_id)
        if code == P.OP_KEYS:
            self._store(handle)  # a version must be loaded
            it_id = self.next_iter
            self.next_iter += 1
            self.iters[it_id] = ((k, None) for k, _ in entry.provider.engine.iterate())
            return self._chunk_payload(P.Writer().u32(it_id), it_id)
        if code == P.OP_ITER_NEXT:
            it_id = r.u32()
            if it_id not in self.iters:
                raise RequestError(P.ERR_STATE, f"iterator {it_id} is closed")
            return self._chunk_payload(P.Writer(), it_id)
        if code == P.OP_ITER_CLOSE:
            self.iters.pop(r.u32(), None)
            return b""
        if code == P.OP_UPGRADE:
            entry.provider.upgrade(self._store(handle))
            return b""
        if code == P.OP_COMMIT:
            store = self._store(handle)
            version = store.commit()
            self.loaded.pop(handle, None)
            new_id, base_id = entry.provider.last_commit_ids
            return (_metrics_payload(P.Writer().i64(version), store.metrics())
                    .str(new_id or "").str(base_id or "").payload())
        if code == P.OP_METRICS:
            return _metrics_payload(P.Writer(), self._store(handle).metrics()).payload()
        if code == P.OP_ABORT:
            if entry.store is not None:
                entry.store.abort()
            self.loaded.pop(handle, None)
            return b""
        if code == P.OP_RELEASE:
            if entry.store is not None:
                entry.store.release()
            self.loaded.pop(handle, None)
            return b""
        if code == P.OP_SNAPSHOT:
            entry.provider.do_snapshot_maintenance()
            return b""
        if code == P.OP_SNAPSHOT_NOW:
            self._store(handle)  # a version must be loaded
            entry.provider.write_snapshot()
            return b""
        if code == P.OP_CHANGES:
            it_id = self.next_iter
            self.next_iter += 1
            version, end_version, end_id = r.i64(), r.i64(), r.str()
            self.iters[it_id] = entry.provider.changelog_records(
                version, (end_version, end_id) if end_id else None)
            return self._chunk_payload(P.Writer().u32(it_id), it_id)
        if code == P.OP_CLEANUP:
            entry.provider.do_cleanup_maintenance(r.i32())
            return b""
        if code == P.OP_CLOSE:
            self.loaded.pop(handle, None)
            self.registry.close(handle)
            return b""
        if code == P.OP_SET_TIME:
            now = real_time_clock.advance(entry.provider, self._store(handle), r.i64())
            return P.Writer().i64(now).payload()
        raise RequestError(P.ERR_BAD_REQUEST, f"unknown request code {code}")


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True


def _exit_on_stdin_eof() -> None:
    """The parent holds our stdin open; EOF means it is gone, so we go too (no orphans)."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        os._exit(0)


def serve(socket_path: str, root: str) -> None:
    os.umask(0o077)  # the socket and every state file: readable by the owner only
    os.makedirs(root, mode=0o700, exist_ok=True)
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    handler = type("BoundConnection", (Connection,), {"registry": Registry(root)})
    server = _Server(socket_path, handler)
    os.chmod(socket_path, 0o600)
    threading.Thread(target=_exit_on_stdin_eof, name="stdin-watch", daemon=True).start()
    print(f"READY {socket_path}", flush=True)
    server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args(argv)
    store_log.configure_logging()  # a bad TTLSTATE_LOG_LEVEL warns instead of killing the worker
    serve(args.socket, args.root)


if __name__ == "__main__":
    main()
