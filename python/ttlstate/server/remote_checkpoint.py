"""A CheckpointLocation whose operations are callbacks into the JVM shim.

The shim moves files with Hadoop's FileSystem (HDFS, S3A, ABFS, GCS). A callback is sent on
the connection that is serving the current request, which the worker records per thread, so
one StoreProvider can be driven by a task's connection and by a maintenance connection.

Work the server does outside any request (a snapshot written after its commit returned,
`snapshot.afterCommit`) has no such connection: its callbacks go to the shim's range service
instead (CHECKPOINT_CALL), on a connection of the calling thread's own. The shim starts that
service for every store that may need it.
"""

from __future__ import annotations

import socket
import threading
from typing import BinaryIO, Protocol

from ttlstate.errors import JvmCheckpointIOError
from ttlstate.server import protocol as P


class CallbackChannel(Protocol):
    def callback(self, kind: int, payload: bytes) -> P.Reader: ...


_current = threading.local()


def set_current_channel(channel: CallbackChannel | None) -> None:
    _current.channel = channel


def callback_result(got: tuple[int, bytes] | None) -> P.Reader:
    """The shim's answer to a callback (CB_RESULT_OK's payload), or its failure raised."""
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
    if code == P.RESP_ERROR:  # the service refused the call itself (a folder it does not serve)
        raise JvmCheckpointIOError(f"checkpoint I/O refused by the JVM: {_error_message(body)}")
    raise P.ProtocolError(f"expected a callback result, got frame code {code}")


def _error_message(body: bytes) -> str:
    """The message of a RESP_ERROR frame's payload (u16 code, str message)."""
    r = P.Reader(body)
    r.u16()
    return r.str()


class ServiceChannel:
    """Callbacks for one checkpoint folder through the shim's range service (CHECKPOINT_CALL)."""

    def __init__(self, connection: _ServiceConnection, directory: str) -> None:
        self._connection = connection
        self._directory = directory

    def callback(self, kind: int, payload: bytes) -> P.Reader:
        return self._connection.call(P.Writer().str(self._directory).u8(kind).payload() + payload)


class _ServiceConnection:
    """One thread's connection to a range service; dropped after a failure, so the next call
    connects anew (the JVM may have closed it)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._sock: socket.socket | None = None
        self._file: BinaryIO | None = None

    def call(self, payload: bytes) -> P.Reader:
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        try:
            self._sock.sendall(P.frame(P.CHECKPOINT_CALL, payload))
            assert self._file is not None
            got = P.read_frame(self._file)
        except OSError as e:
            self.close()
            raise JvmCheckpointIOError(f"the shim's range service at {self._path} is unreachable: {e}") from e
        return callback_result(got)

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self._path)
            answers = sock.makefile("rb")
            sock.sendall(P.frame(P.OP_HELLO, P.Writer().u32(P.MAGIC).u32(P.PROTOCOL_VERSION).payload()))
            got = P.read_frame(answers)
        except OSError as e:
            sock.close()
            raise JvmCheckpointIOError(f"the shim's range service at {self._path} is unreachable: {e}") from e
        if got is None or got[0] != P.RESP_OK:
            answers.close()
            sock.close()
            why = _error_message(got[1]) if got is not None and got[0] == P.RESP_ERROR else "no answer"
            raise JvmCheckpointIOError(f"the shim's range service at {self._path} refused this server: {why}")
        self._sock, self._file = sock, answers

    def close(self) -> None:
        for open_ in (self._file, self._sock):
            if open_ is not None:
                open_.close()
        self._sock = self._file = None


def _service_connection(path: str) -> _ServiceConnection:
    """The calling thread's connection to the range service at `path`."""
    connections: dict[str, _ServiceConnection] = _current.__dict__.setdefault("services", {})
    if path not in connections:
        connections[path] = _ServiceConnection(path)
    return connections[path]


class RemoteCheckpointLocation:
    def __init__(self, directory: str = "", range_socket: str | None = None) -> None:
        self.directory = directory  # the store's checkpoint directory URI
        # The shim's range service, when it started one for the store (`snapshot.readInPlace`,
        # `snapshot.afterCommit`): SST files may then be read where they lie (store/in_place.py),
        # and work outside requests reaches the checkpoint through it.
        self.range_socket = range_socket

    def describe(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}" if self.directory else name

    def _channel(self) -> CallbackChannel:
        """The current request's connection, else (work outside requests) the range service."""
        channel: CallbackChannel | None = getattr(_current, "channel", None)
        if channel is not None:
            return channel
        if not self.range_socket or not self.directory:
            raise RuntimeError(f"ttlstate: checkpoint access to {self.describe('')} outside of a shim "
                               "request, and the shim offered no range service for it")
        return ServiceChannel(_service_connection(self.range_socket), self.directory)

    def list_files(self) -> list[str]:
        r = self._channel().callback(P.CB_LIST, b"")
        return [r.str() for _ in range(r.u32())]

    def fetch(self, name: str, local_path: str) -> None:
        try:
            self._channel().callback(P.CB_FETCH, P.Writer().str(name).str(local_path).payload())
        except FileNotFoundError:
            raise FileNotFoundError(f"checkpoint file {name} does not exist") from None

    def publish(self, local_path: str, name: str) -> None:
        self._channel().callback(P.CB_PUBLISH, P.Writer().str(local_path).str(name).payload())

    def delete(self, names: list[str]) -> None:
        w = P.Writer().u32(len(names))
        for n in names:
            w.str(n)
        self._channel().callback(P.CB_DELETE, w.payload())
