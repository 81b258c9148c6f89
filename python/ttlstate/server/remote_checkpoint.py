"""A CheckpointLocation whose operations are callbacks into the JVM shim.

The shim moves files with Hadoop's FileSystem (HDFS, S3A, ABFS, GCS). A callback is sent on
the connection that is serving the current request, which the worker records per thread, so
one StoreProvider can be driven by a task's connection and by a maintenance connection.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ttlstate.server import protocol as P


class CallbackChannel(Protocol):
    def callback(self, kind: int, payload: bytes) -> P.Reader: ...


_current = threading.local()


def set_current_channel(channel: CallbackChannel | None) -> None:
    _current.channel = channel


def _channel() -> CallbackChannel:
    channel = getattr(_current, "channel", None)
    if channel is None:
        raise RuntimeError("ttlstate: checkpoint access outside of a shim request")
    return channel


class RemoteCheckpointLocation:
    def __init__(self, directory: str = "", range_socket: str | None = None) -> None:
        self.directory = directory  # the store's checkpoint directory URI
        # The shim's range service, when it started one for the store (`snapshot.readInPlace`):
        # SST files are then read where they lie (store/in_place.py).
        self.range_socket = range_socket

    def describe(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}" if self.directory else name

    def list_files(self) -> list[str]:
        r = _channel().callback(P.CB_LIST, b"")
        return [r.str() for _ in range(r.u32())]

    def fetch(self, name: str, local_path: str) -> None:
        try:
            _channel().callback(P.CB_FETCH, P.Writer().str(name).str(local_path).payload())
        except FileNotFoundError:
            raise FileNotFoundError(f"checkpoint file {name} does not exist") from None

    def publish(self, local_path: str, name: str) -> None:
        _channel().callback(P.CB_PUBLISH, P.Writer().str(local_path).str(name).payload())

    def delete(self, names: list[str]) -> None:
        w = P.Writer().u32(len(names))
        for n in names:
            w.str(n)
        _channel().callback(P.CB_DELETE, w.payload())
