"""The native connection loop (native/src/connection.cpp): it answers a connection's per-entry
frames itself, with the GIL released, and hands every other frame to a Python handler."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from ctypes import byref, c_int, c_uint8
from typing import Any

from ttlstate._native_handles import Handle
from ttlstate._native_lib import FORWARD, NativeFailure, Out, lib, text
from ttlstate._native_txn import Txn


class Connection(Handle):
    __slots__ = ()
    _free = lib.ttl_connection_free

    def __init__(self, fd: int) -> None:
        super().__init__(lib.ttl_connection_new(fd))

    def serve(self, handler: Callable[[int, bytes], tuple[int, bytes] | None]) -> None:
        """Serve frames until the peer closes; `handler(code, payload)` answers the control plane."""
        raised: list[BaseException] = []

        def forward(_ctx: Any, code: int, data: int, size: int, reply: int) -> int:
            try:
                answer = handler(code, ctypes.string_at(data, size) if size else b"")
                if answer is None:
                    return 0
                reply_code, payload = answer
                payload = text(payload)
                lib.ttl_reply_set(reply, reply_code, payload, len(payload))
                return 1
            except BaseException as e:  # noqa: BLE001 - re-raised by serve() when the loop ends with it
                raised[:] = [e]
                lib.ttl_reply_fail(reply, f"{type(e).__name__}: {e}".encode("utf-8", "replace"))
                return -1

        callback = FORWARD(forward)
        try:
            lib.ttl_connection_serve(self._h, callback, None)
        except NativeFailure:
            if raised:
                raise raised[0] from None
            raise

    def read_frame(self) -> tuple[int, bytes] | None:
        out, got, code = Out(), c_int(), c_uint8()
        lib.ttl_connection_read_frame(self._h, byref(got), byref(code), *out.refs())
        return (code.value, out.bytes()) if got.value else None

    def send(self, code: int, payload: bytes) -> None:
        lib.ttl_connection_send(self._h, code, payload, len(payload))

    def bind(self, handle: int, txn: Txn | None) -> None:
        lib.ttl_connection_bind(self._h, handle, txn._h if txn is not None else None)

    def unbind(self, handle: int) -> None:
        lib.ttl_connection_unbind(self._h, handle)

    @property
    def native_requests(self) -> int:
        return int(lib.ttl_connection_native_requests(self._h))
