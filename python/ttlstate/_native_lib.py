"""Loads the native engine's shared library and declares its C ABI from the table in
`ttlstate._native_abi` (from which native/include/ttlstate/c_api.h's declarations are generated).

The library is plain C ABI, loaded with ctypes, so one binary serves every CPython version.
`ctypes.CDLL` releases the GIL for each call (blocking engine work runs without it) and a
`CFUNCTYPE` callback takes it back. This module holds what `ttlstate._native` needs to call the
library: the loaded library, its status codes as exceptions, and the list encoding of the ABI.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import struct
import threading
from collections.abc import Sequence
from ctypes import (
    POINTER,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

from ttlstate import _native_abi as abi

LIBRARY_NAME = "libttlstate_native.so"
LIBRARY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)


class StateError(RuntimeError):
    """A call the store's lifecycle does not allow (write after commit, superseded handle, ...)."""


class PeerGone(ConnectionError):
    """The shim closed the connection (or it broke)."""


class NativeFailure(Exception):
    """Raised by `check` for TTL_ERR_CALLBACK: the caller re-raises the callback's exception."""


CALLBACK_FAILED = next(s.value for s in abi.STATUSES if s.name == "TTL_ERR_CALLBACK")
_RAISES: dict[str, type[Exception]] = {
    "StateError": StateError, "PeerGone": PeerGone, "RuntimeError": RuntimeError,
    "ValueError": ValueError, "MemoryError": MemoryError, "IndexError": IndexError,
    "OverflowError": OverflowError,
}
# ttl_status -> the exception raised (TTL_ERR_CALLBACK: `check` raises NativeFailure, which
# Connection.serve turns back into the callback's exception).
ERRORS: dict[int, type[Exception]] = {s.value: _RAISES[s.raises] for s in abi.STATUSES
                                      if s.value and s.value != CALLBACK_FAILED}


def _load() -> ctypes.CDLL:
    if not os.path.exists(LIBRARY_PATH):
        raise ImportError(f"the native engine library {LIBRARY_PATH} is not built")
    try:
        return ctypes.CDLL(LIBRARY_PATH)
    except OSError as e:
        raise ImportError(f"the native engine library {LIBRARY_PATH} does not load: {e}") from e


lib = _load()


def raise_last() -> None:
    """Raises the exception of the thread's last failed call."""
    raise ERRORS.get(lib.ttl_last_status(), RuntimeError)(lib.ttl_last_error().decode("utf-8", "replace"))


def check(status: int, func: Any = None, args: Any = None) -> int:
    """ctypes errcheck: raises the exception a non-zero ttl_status stands for."""
    if status:
        message = lib.ttl_last_error().decode("utf-8", "replace")
        if status == CALLBACK_FAILED:
            raise NativeFailure(message)
        raise ERRORS.get(status, RuntimeError)(message)
    return status


P = c_void_p  # an opaque handle
BUF = POINTER(c_void_p)  # const char** data
_SCALARS: dict[str, Any] = {
    "int": c_int, "int64_t": c_int64, "uint64_t": c_uint64, "uint32_t": c_uint32, "uint8_t": c_uint8,
    "size_t": c_size_t, "double": c_double,
}
_ENUMS = frozenset({"ttl_status", "ttl_txn_field"})
_HANDLES = frozenset(abi.HANDLES)


def ctype_of(c_type: str, by_address: bool = False) -> Any:
    """The ctypes type a parameter (or result) of C type `c_type` is declared with: bytes in for
    `const char*`, a caller's buffer or a plain address for other pointers to bytes (and for
    `by_address` ones), an opaque handle for a handle."""
    if c_type == "void":
        return None
    if c_type == "const char*":
        return c_char_p
    if c_type in ("char*", "void*") or (by_address and c_type.endswith("*")):
        return c_void_p
    if c_type == "const char**":
        return BUF
    if c_type == abi.FORWARD.name:
        return FORWARD
    base = c_type.removeprefix("const ")
    if base in _SCALARS:
        return _SCALARS[base]
    if base in _ENUMS:
        return c_int
    if base.rstrip("*") in _HANDLES:
        return P if base.count("*") == 1 else POINTER(P)
    if base.endswith("*") and base[:-1] in _SCALARS:
        return POINTER(_SCALARS[base[:-1]])
    raise TypeError(f"no ctypes type for the C type {c_type!r}: extend _native_lib.ctype_of")


# The callback type: every pointer reaches Python as an address.
FORWARD = ctypes.CFUNCTYPE(ctype_of(abi.FORWARD.result),
                           *(c_void_p if p.c_type.endswith("*") else ctype_of(p.c_type)
                             for p in abi.FORWARD.params))


def signature(f: abi.Function) -> tuple[Any, list[Any]]:
    """(restype, argtypes) of a function of the table."""
    return ctype_of(f.result), [ctype_of(p.c_type, p.name in f.by_address) for p in f.params]


def _declare() -> None:
    keep_gil = ctypes.PyDLL(LIBRARY_PATH)  # the same loaded library, called without releasing the GIL
    for f in abi.FUNCTIONS:
        fn = getattr(keep_gil if f.keep_gil else lib, f.name)
        setattr(lib, f.name, fn)  # `lib.<name>` is the one declared here
        fn.restype, fn.argtypes = signature(f)
        if f.result == "ttl_status" and f.checked:
            fn.errcheck = check


_declare()


def _constants() -> tuple[dict[str, int], dict[str, int]]:
    """The library's constants (ttl_constants): its own, and the protocol's it was compiled with."""
    data, size = c_void_p(), c_size_t()
    lib.ttl_constants(ctypes.byref(data), ctypes.byref(size))
    module: dict[str, int] = {}
    protocol: dict[str, int] = {}
    for line in ctypes.string_at(data.value or 0, size.value).decode().splitlines():
        name, value = line.split("=")
        if name.startswith("protocol."):
            protocol[name.removeprefix("protocol.")] = int(value)
        else:
            module[name] = int(value)
    return module, protocol


MODULE_CONSTANTS, PROTOCOL_CONSTANTS = _constants()


def text(value: str | bytes) -> bytes:
    """A std::string argument: str as UTF-8, bytes-like as is (what pybind11 accepted)."""
    return value.encode() if isinstance(value, str) else bytes(value)


class Out:
    """The out-parameters of one call: a data pointer and size into the library's result buffer."""

    __slots__ = ("data", "size")

    def __init__(self) -> None:
        self.data = c_void_p()
        self.size = c_size_t()

    def refs(self) -> tuple[Any, Any]:
        return ctypes.byref(self.data), ctypes.byref(self.size)

    def bytes(self) -> bytes:
        return ctypes.string_at(self.data.value or 0, self.size.value) if self.size.value else b""


class Scratch(threading.local):
    """Per thread (calls run without the GIL): the buffer single values are read into, and an
    int64 out-parameter, allocated once."""

    def __init__(self) -> None:
        self.grow(4096)
        self.ts = c_int64()
        self.ts_ref = ctypes.addressof(self.ts)

    def grow(self, size: int) -> None:
        self.cap = size
        # Any: a slice of a char array is bytes (typeshed says list); the per-entry reads slice
        # it directly, with nothing in between.
        self.buf: Any = ctypes.create_string_buffer(size)


scratch = Scratch()


def read_value(n: int, s: Scratch) -> bytes | None:
    """The result of a ttl_*_get_into call that returned n into s.buf."""
    if n < 0:
        if n == -1:
            return None
        raise_last()
    if n > s.cap:
        s.grow(max(n, 2 * s.cap))
        lib.ttl_take(s.buf, s.cap)
    return s.buf[:n]


def encode_list(entries: Sequence[bytes | None]) -> bytes:
    """The ABI's list (c_api.h): count, offsets, present flags, then the entries' bytes."""
    count = len(entries)
    header = 4 + 4 * (count + 1) + count
    ends = itertools.accumulate((len(e) if e is not None else 0 for e in entries), initial=header)
    present = bytes(e is not None for e in entries)
    return b"".join([struct.pack(f"<{count + 2}I", count, *ends), present, *(e or b"" for e in entries)])


def decode_list(raw: bytes) -> list[bytes | None]:
    count = int.from_bytes(raw[:4], "little")
    start = 4 + 4 * (count + 1)
    offsets = struct.unpack_from(f"<{count + 1}I", raw, 4)
    values: list[bytes | None] = [raw[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]
    present = raw[start:start + count]
    if present.count(0):
        values = [v if p else None for v, p in zip(values, present, strict=True)]
    return values


def decode_pairs(raw: bytes) -> list[tuple[Any, Any]]:
    flat = iter(decode_list(raw))
    return list(zip(flat, flat, strict=True))
