"""A state server worker: owns a shard of the executor's stores and serves them on one socket.

The supervisor (`python -m ttlstate.server`) forks it (worker_processes.py). It exits when its
stdin reaches EOF (its supervisor is gone), so a worker never outlives the executor. Each
connection is served by its own thread; a store lives in exactly one worker.
"""

from __future__ import annotations

import logging
import os
import socketserver
import struct
import sys
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator

from ttlstate.engine.select import native_module
from ttlstate.errors import ERR_INTERNAL, RequestError, error_code
from ttlstate.server import operations
from ttlstate.server import protocol as P
from ttlstate.server.registry import Registry
from ttlstate.server.remote_checkpoint import callback_result, set_current_channel
from ttlstate.store.planes import free_memory
from ttlstate.store.planes.base import StoreVersion

log = logging.getLogger("ttlstate.server")


def _error_payload(e: BaseException) -> bytes:
    """A failed pipelined write, owed to the next synchronous request of the connection."""
    return P.Writer().u16(error_code(e)).str(f"an earlier pipelined write failed: {e}").payload()


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
    # Every connection being served: whether any has a version open is the worker's "busy".
    live: weakref.WeakSet[Connection] = weakref.WeakSet()

    def setup(self) -> None:
        super().setup()
        self.pending_error: BaseException | None = None
        self.iters: dict[int, Iterator[tuple[bytes, bytes | None]]] = {}
        self.next_iter = 1
        self.greeted = False
        # The versions this connection loaded and has not ended: aborted if it drops.
        self.loaded: dict[int, StoreVersion] = {}
        native = native_module()
        self.native = native.Connection(self.request.fileno()) if native is not None else None
        Connection.live.add(self)  # last: the trim thread reads `loaded` of every live connection

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
        return callback_result(self._read_frame())

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
        handles = list(self.loaded)
        self.loaded.clear()
        for handle in handles:  # a close waiting for these versions happens now
            self.registry.version_ended(handle)

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
            if error_code(e) == ERR_INTERNAL and not isinstance(e, ConnectionError):
                log.error("ttlstate server: request %d failed\n%s", code, traceback.format_exc())
            return P.RESP_ERROR, P.Writer().u16(error_code(e)).str(str(e) or type(e).__name__).payload()

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
                        self.send(P.RESP_ERROR, P.Writer().u16(error_code(e)).str(str(e)).payload())
                    continue
                if self.pending_error is not None:
                    failed, self.pending_error = self.pending_error, None
                    self.send(P.RESP_ERROR, _error_payload(failed))
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
            store = self.version(r.u32())
            for _ in range(r.u32()):
                kind = r.u8()
                key = r.bytes()
                if kind in (P.WRITE_PUT, P.WRITE_PUT_NEW, P.WRITE_PUT_PRESENT):
                    store.put(key, r.bytes())
                elif kind == P.WRITE_PUT_ENTRY:
                    store.put_entry(key, r.bytes())
                elif kind == P.WRITE_REMOVE:
                    store.remove(key)
                elif kind == P.WRITE_REMOVE_EXPIRED:
                    store.remove_if_expired(key)
                elif kind == P.WRITE_APPEND:
                    store.append(key, r.bytes())
                elif kind == P.WRITE_REMOVE_PREFIX:
                    for stored in [k for k, _ in store.prefix_scan(key)]:
                        store.remove(stored)
                else:
                    raise P.ProtocolError(f"unknown write kind {kind}")
        except Exception as e:
            self.pending_error = e

    def version(self, handle: int) -> StoreVersion:
        """The version the store's last load gave."""
        store = self.registry.get(handle).store
        if store is None:
            raise RequestError(P.ERR_STATE, f"store handle {handle} has no loaded version")
        return store

    def start_iterator(self, it: Iterator[tuple[bytes, bytes | None]]) -> bytes:
        """Registers `it` and answers with its id and first chunk."""
        it_id = self.next_iter
        self.next_iter += 1
        self.iters[it_id] = it
        return self.chunk_payload(P.Writer().u32(it_id), it_id)

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

    def chunk_payload(self, w: P.Writer, it_id: int) -> bytes:
        done, pairs = self._chunk(self.iters[it_id])
        if done:
            del self.iters[it_id]
        w.u8(int(done)).u32(len(pairs))
        for k, v in pairs:
            w.bytes(k).bytes(v)
        return w.payload()

    def dispatch(self, code: int, r: P.Reader) -> bytes:
        if code == P.OP_HELLO:
            return operations.hello(self, r)
        if not self.greeted:
            raise RequestError(P.ERR_PROTOCOL_VERSION, "first frame must be HELLO")
        if code == P.OP_OPEN:
            return operations.open_store(self, r)
        handler = operations.STORE_REQUESTS.get(code)
        if handler is None:
            raise RequestError(P.ERR_BAD_REQUEST, f"unknown request code {code}")
        handle = r.u32()
        return handler(self, self.registry.get(handle), handle, r)


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


def _idle() -> bool:
    """No connection has a store version open (between batches)."""
    return not any(c.loaded for c in list(Connection.live))


def _in_use(handle: int) -> bool:
    """Some connection has a version of the store `handle` open (Registry.close waits for it)."""
    while True:
        try:
            return any(handle in c.loaded for c in list(Connection.live))
        except RuntimeError:  # the set of connections changed while it was copied: look again
            continue


def serve(socket_path: str, root: str, ready: Callable[[str], None]) -> None:
    """Serves the stores under `root` on `socket_path` until stdin reaches EOF; `ready` is told
    `READY <socket>` once connections are accepted."""
    os.umask(0o077)  # the socket and every state file: readable by the owner only
    os.makedirs(root, mode=0o700, exist_ok=True)
    if os.path.exists(socket_path):
        os.unlink(socket_path)
    handler = type("BoundConnection", (Connection,), {"registry": Registry(root, _in_use)})
    free_memory.set_idle_probe(_idle)
    server = _Server(socket_path, handler)
    os.chmod(socket_path, 0o600)
    threading.Thread(target=_exit_on_stdin_eof, name="stdin-watch", daemon=True).start()
    ready(f"READY {socket_path}")
    server.serve_forever()
