"""The C ABI is written twice, as C declarations (native/include/ttlstate/c_api.h) and as the
ctypes signatures that bind them (ttlstate._native_lib). A mismatch there is not a compile
error but a wrong argument at run time, so this test reads the header and checks every
function's name, result and parameters against the ctypes table, and the status codes against
the exceptions they raise."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any

import pytest

from ttlstate import _native_lib as N

HEADER = Path(__file__).resolve().parents[2] / "native" / "include" / "ttlstate" / "c_api.h"

# C type (spaces and `const` dropped) -> the ctypes type the binding must declare.
SCALARS: dict[str, Any] = {
    "int": ctypes.c_int, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "uint32_t": ctypes.c_uint32, "uint8_t": ctypes.c_uint8, "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
}


def _declarations() -> dict[str, tuple[str, list[str]]]:
    """name -> (result type, parameter types), from every `TTL_API` declaration."""
    text = re.sub(r"//[^\n]*", "", HEADER.read_text())
    found = re.findall(r"TTL_API\s+([\w\s\*]+?)\s*\b(ttl_\w+)\s*\(([^)]*)\)\s*;", text)
    out: dict[str, tuple[str, list[str]]] = {}
    for result, name, params in found:
        types = [] if params.strip() in ("", "void") else [
            re.sub(r"\s*\b\w+$", "", p.strip()) for p in params.split(",")]
        out[name] = (_norm(result), [_norm(t) for t in types])
    return out


def _norm(c_type: str) -> str:
    return re.sub(r"\s+", "", c_type.replace("const", ""))


ENUMS = set(re.findall(r"typedef\s+enum\s*\{[^}]*\}\s*(\w+)\s*;", HEADER.read_text()))


def _expected(c_type: str) -> Any:
    """The ctypes type a parameter of this C type is declared with (a pointer may also be
    declared `c_void_p`, an address passed as is on a per-entry path)."""
    if c_type in SCALARS:
        return SCALARS[c_type]
    if c_type in ENUMS:
        return ctypes.c_int
    if c_type == "ttl_forward_fn":
        return N.FORWARD
    if c_type in ("char*", "void*"):
        return (ctypes.c_char_p, ctypes.c_void_p)  # bytes in, or a caller's buffer
    if c_type == "char**":
        return N.BUF
    if re.fullmatch(r"ttl_\w+\*", c_type):
        return N.P
    if re.fullmatch(r"ttl_\w+\*\*", c_type):
        return ctypes.POINTER(N.P)
    if c_type.endswith("*") and c_type[:-1] in SCALARS:
        return (ctypes.POINTER(SCALARS[c_type[:-1]]), ctypes.c_void_p)
    raise AssertionError(f"no ctypes mapping for C type {c_type!r}: extend this test")


DECLARED = _declarations()


def test_the_header_and_the_binding_name_the_same_functions() -> None:
    assert len(DECLARED) > 50  # the parser read the header
    assert sorted(DECLARED) == sorted(N._SIGNATURES)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_function_has_the_headers_signature(name: str) -> None:
    result, params = DECLARED[name]
    restype, argtypes = N._SIGNATURES[name]
    if result == "ttl_status":
        assert restype == "status"
    elif result == "void":
        assert restype is None
    else:
        assert restype == _expected(result) or (result == "char*" and restype is ctypes.c_char_p)
    assert len(argtypes) == len(params), (params, argtypes)
    for position, (c_type, declared) in enumerate(zip(params, argtypes, strict=True)):
        want = _expected(c_type)
        ok = declared in want if isinstance(want, tuple) else declared == want
        assert ok, f"{name} parameter {position}: C {c_type}, ctypes {declared}"


def test_status_codes_raise_the_exceptions_the_header_names() -> None:
    codes = dict(re.findall(r"\b(TTL_\w+)\s*=\s*(\d+)", HEADER.read_text()))
    assert int(codes["TTL_OK"]) == 0
    assert int(codes["TTL_ERR_CALLBACK"]) == N.CALLBACK_FAILED
    named = {int(v) for k, v in codes.items() if k.startswith("TTL_ERR_") and k != "TTL_ERR_CALLBACK"}
    assert named == set(N._ERRORS)
    assert N._ERRORS[int(codes["TTL_ERR_STATE"])] is N.StateError
    assert N._ERRORS[int(codes["TTL_ERR_PEER_GONE"])] is N.PeerGone
    assert N._ERRORS[int(codes["TTL_ERR_VALUE"])] is ValueError
