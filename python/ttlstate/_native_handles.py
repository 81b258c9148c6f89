"""The base of the native library's objects: a Python object owning one opaque handle of the
C ABI (c_api.h), freed when collected; and the argument conventions the objects share."""

from __future__ import annotations

from ctypes import c_void_p
from typing import Any

from ttlstate._native_lib import Out, text


class Handle:
    """Owns one handle of the library; frees it when collected."""

    __slots__ = ("_h",)
    _free: Any = None

    def __init__(self, handle: int | None) -> None:
        if not handle:
            raise MemoryError("the native engine returned no object")
        self._h: int | None = handle

    @classmethod
    def own(cls, handle: c_void_p) -> Any:
        obj = cls.__new__(cls)
        Handle.__init__(obj, handle.value)
        return obj

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            self._h = None
            type(self)._free(h)


def optional(out: Out, present: int) -> bytes | None:
    """The out-parameters' bytes if the call said a value is present, else None."""
    return out.bytes() if present else None


def bound(value: str | bytes | None) -> tuple[bytes | None, int]:
    """An optional bytes argument as (pointer, size): NULL means None."""
    if value is None:
        return None, 0
    b = text(value)
    return b, len(b)
