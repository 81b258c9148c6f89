"""The shim's range service (jvm-shim RangeService.scala) in Python, for tests without a JVM:
serves byte ranges of the files under one folder over a Unix socket, with the frames of
server/protocol.py (OP_HELLO, RANGE_READ), and the server's checkpoint callbacks on that folder
(CHECKPOINT_CALL). `failing` makes it answer reads as the shim does when the file system is
unreachable; `stop()` takes the socket away. `FolderChannel` answers callbacks as a request's
connection to the shim does (CheckpointFiles.scala)."""

from __future__ import annotations

import io
import os
import socketserver
import tempfile
import threading

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.server import protocol as P
from ttlstate.server.remote_checkpoint import callback_result
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock


class RangeService:
    def __init__(self, root: str, socket_path: str) -> None:
        self.root = os.path.abspath(root)
        self.socket_path = socket_path
        self.failing: str | None = None
        self.requests = 0
        self.bytes = 0
        self.checkpoint_calls = 0
        self._lock = threading.Lock()
        service = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                service._serve(self.rfile, self.wfile)

        self._server = socketserver.ThreadingUnixStreamServer(socket_path, Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

    def _serve(self, rfile, wfile) -> None:  # noqa: ANN001
        while (got := P.read_frame(rfile)) is not None:
            code, payload = got
            r = P.Reader(payload)
            if code == P.OP_HELLO:
                assert r.u32() == P.MAGIC
                reply = P.frame(P.RESP_OK, P.Writer().u32(P.PROTOCOL_VERSION).payload())
            elif code == P.RANGE_READ:
                reply = self._read(r.str(), r.i64(), r.u32())
            elif code == P.CHECKPOINT_CALL:
                reply = self._checkpoint_call(r)
            else:
                return
            wfile.write(reply)
            wfile.flush()

    def _read(self, uri: str, offset: int, length: int) -> bytes:
        path = os.path.abspath(uri)
        if not path.startswith(self.root + os.sep):
            return _error(P.ERR_BAD_REQUEST, f"{uri} is not served")
        if self.failing is not None:
            return _error(P.ERR_CHECKPOINT, f"reading {uri} at {offset} ({length} bytes): {self.failing}")
        try:
            with open(path, "rb") as f:
                data = os.pread(f.fileno(), length, offset)
        except FileNotFoundError:
            return P.frame(P.RESP_OK, P.Writer().u8(P.RANGE_MISSING).bytes(b"").payload())
        with self._lock:
            self.requests += 1
            self.bytes += len(data)
        return P.frame(P.RESP_OK, P.Writer().u8(P.RANGE_DATA).bytes(data).payload())


    def _checkpoint_call(self, r: P.Reader) -> bytes:
        folder, kind = r.str(), r.u8()
        if os.path.abspath(folder) != self.root:
            return _error(P.ERR_BAD_REQUEST, f"{folder} is not a checkpoint folder of a store opened here")
        with self._lock:
            self.checkpoint_calls += 1
        return serve_callback(self.root, kind, r)


def serve_callback(folder: str, kind: int, r: P.Reader) -> bytes:
    """One checkpoint callback on a local folder, answered as the shim answers it."""
    files = LocalCheckpointLocation(folder)
    w = P.Writer()
    try:
        if kind == P.CB_LIST:
            names = files.list_files()
            w.u32(len(names))
            for n in names:
                w.str(n)
        elif kind == P.CB_FETCH:
            name, local = r.str(), r.str()
            files.fetch(name, local)
        elif kind == P.CB_PUBLISH:
            local, name = r.str(), r.str()
            files.publish(local, name)
        elif kind == P.CB_DELETE:
            files.delete([r.str() for _ in range(r.u32())])
        else:
            raise OSError(f"unknown callback {kind}")
    except FileNotFoundError as e:
        return P.frame(P.CB_RESULT_ERROR, P.Writer().u8(P.CB_ERR_NOT_FOUND).str(str(e)).payload())
    except OSError as e:
        return P.frame(P.CB_RESULT_ERROR, P.Writer().u8(P.CB_ERR_IO).str(str(e)).payload())
    return P.frame(P.CB_RESULT_OK, w.payload())


class FolderChannel:
    """A request's connection to the shim, as the worker records it (set_current_channel), whose
    callbacks the shim answers on a local folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def callback(self, kind: int, payload: bytes) -> P.Reader:
        return callback_result(P.read_frame(io.BytesIO(serve_callback(self.folder, kind, P.Reader(payload)))))


def _error(code: int, message: str) -> bytes:
    return P.frame(P.RESP_ERROR, P.Writer().u16(code).str(message).payload())


def short_socket_path(tmp: str, name: str) -> str:
    """A socket path short enough for sun_path (a pytest tmp_path may not be)."""
    path = os.path.join(tmp, name)
    if len(path.encode()) < 100:
        return path
    return os.path.join(tempfile.mkdtemp(prefix="ttlrs"), name)



def without_metadata_warm_up() -> None:
    """Restores in place in this process (a test's own) no longer read each file's index and
    filter at the load: a test's small files have one data block each, which that read caches
    too, leaving nothing for the later reads a test watches."""
    from ttlstate.engine.native_engine import NativeEngine

    NativeEngine.warm_metadata = lambda self, threads: None  # type: ignore[method-assign]


def served_provider(checkpoint_dir: str, local_dir: str,
                    local_fill: bool = False) -> tuple[RangeService, StoreProvider]:
    """A fresh executor's provider restoring in place through a range service over the folder
    (its placeholders stay so unless `local_fill`)."""
    os.makedirs(local_dir + "-s", exist_ok=True)
    service = RangeService(checkpoint_dir, short_socket_path(local_dir + "-s", "r.sock"))
    cfg = StoreConfig(TtlConfig(), EngineKind.NATIVE, 2, snapshot_read_in_place=True,
                      snapshot_local_fill=local_fill)
    location = Served(LocalCheckpointLocation(checkpoint_dir), service.socket_path)
    return service, StoreProvider("op0/p0", local_dir, location, cfg, ManualClock(1000))  # type: ignore[arg-type]


class Served:
    """A checkpoint folder the state server reaches only through the shim (any location but a
    LocalCheckpointLocation), whose files the range service at `range_socket` serves: what
    server/remote_checkpoint.py is when the shim started its range service."""

    def __init__(self, local: LocalCheckpointLocation, range_socket: str) -> None:
        self._local = local
        self.directory = local.directory
        self.range_socket = range_socket

    def __getattr__(self, name: str) -> object:
        return getattr(self._local, name)
