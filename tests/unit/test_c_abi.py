"""The C ABI is declared once, in the table `ttlstate._native_abi`: the header's declarations are
generated from it (ttlstate.codegen) and the ctypes signatures derived from it (_native_lib). A
mismatch between a binding and the C code is not a compile error but a wrong argument at run
time, so these tests read the generated header's prototypes back and check them against the
table, the header the library was built with against the generator, every bound function's
ctypes types against its C types, c_api.cpp's definitions against the table, and the status
codes against the exceptions they raise."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any

import pytest

from ttlstate import _native_abi as abi
from ttlstate import _native_lib as N
from ttlstate.codegen import cpp

ROOT = Path(__file__).resolve().parents[2]
BUILT_HEADER = ROOT / "build" / "generated" / "include" / "ttlstate" / "generated" / "c_api_functions.h"
C_API_CPP = ROOT / "native" / "src" / "c_api.cpp"
HEADER = cpp.c_api_functions()

# C type (spaces and `const` dropped) -> the ctypes type the binding must declare.
SCALARS: dict[str, Any] = {
    "int": ctypes.c_int, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "uint32_t": ctypes.c_uint32, "uint8_t": ctypes.c_uint8, "size_t": ctypes.c_size_t,
    "double": ctypes.c_double,
}


def _norm(c_type: str) -> str:
    return re.sub(r"\s+", "", c_type.replace("const", ""))


def _declarations(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (result type, parameter types), from every `TTL_API` declaration."""
    text = re.sub(r"//[^\n]*", "", text)
    found = re.findall(r"TTL_API\s+([\w\s\*]+?)\s*\b(ttl_\w+)\s*\(([^)]*)\)\s*;", text)
    out: dict[str, tuple[str, list[str]]] = {}
    for result, name, params in found:
        types = [] if params.strip() in ("", "void") else [
            re.sub(r"\s*\b\w+$", "", p.strip()) for p in params.split(",")]
        out[name] = (_norm(result), [_norm(t) for t in types])
    return out


DECLARED = _declarations(HEADER)
ENUMS = set(re.findall(r"typedef\s+enum\s*\{[^}]*\}\s*(\w+)\s*;", HEADER))
TABLE = {f.name: f for f in abi.FUNCTIONS}


def test_the_generated_header_declares_exactly_the_tables_functions() -> None:
    assert len(DECLARED) == len(abi.FUNCTIONS) > 50  # the parser read the header
    for f in abi.FUNCTIONS:
        assert DECLARED[f.name] == (_norm(f.result), [_norm(p.c_type) for p in f.params]), f.name


def test_the_library_was_built_with_the_header_the_table_generates_now() -> None:
    assert BUILT_HEADER.read_text() == HEADER, "stale build: run `make native`"


def test_c_api_cpp_defines_exactly_the_tables_functions() -> None:
    text = C_API_CPP.read_text()
    defined = set(re.findall(r"^[\w\s\*]+?\b(ttl_\w+)\(", text[text.index('extern "C" {'):], re.M))
    assert defined == set(TABLE)


def _expected(c_type: str, by_address: bool) -> Any:
    """The ctypes type a parameter of this C type is declared with (bytes in for `const char*`,
    a caller's buffer or an address for other pointers to bytes and `by_address` ones)."""
    if c_type in SCALARS:
        return SCALARS[c_type]
    if c_type in ENUMS:
        return ctypes.c_int
    if c_type == "ttl_forward_fn":
        return N.FORWARD
    if by_address and c_type.endswith("*"):
        return ctypes.c_void_p
    if c_type == "char**":
        return ctypes.POINTER(ctypes.c_void_p)
    if re.fullmatch(r"ttl_\w+\*", c_type):
        return ctypes.c_void_p
    if re.fullmatch(r"ttl_\w+\*\*", c_type):
        return ctypes.POINTER(ctypes.c_void_p)
    if c_type.endswith("*") and c_type[:-1] in SCALARS:
        return ctypes.POINTER(SCALARS[c_type[:-1]])
    raise AssertionError(f"no ctypes mapping for C type {c_type!r}: extend this test")


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_bound_function_has_the_headers_signature(name: str) -> None:
    f = TABLE[name]
    result, params = DECLARED[name]
    bound = getattr(N.lib, name)
    if result == "void":
        assert bound.restype is None
    elif result == "char*":
        assert bound.restype is ctypes.c_char_p  # const char*: a NUL-terminated message
    else:
        assert bound.restype == _expected(result, False)
    assert len(bound.argtypes) == len(params), (params, bound.argtypes)
    for position, (p, c_type, declared) in enumerate(zip(f.params, params, bound.argtypes, strict=True)):
        if p.c_type == "const char*":
            want: Any = ctypes.c_char_p  # bytes in
        elif c_type in ("char*", "void*"):
            want = ctypes.c_void_p  # a caller's buffer, or an address
        else:
            want = _expected(c_type, p.name in f.by_address)
        assert declared == want, f"{name} parameter {position}: C {c_type}, ctypes {declared}"
    checked = result == "ttl_status" and f.checked
    assert (getattr(bound, "errcheck", None) is N.check) == checked
    assert bool(bound._flags_ & ctypes._FUNCFLAG_PYTHONAPI) == f.keep_gil


def test_the_callback_type_passes_every_pointer_as_an_address() -> None:
    assert N.FORWARD._restype_ is ctypes.c_int
    assert N.FORWARD._argtypes_ == (ctypes.c_void_p, ctypes.c_uint8, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_void_p)
    assert "typedef int (*ttl_forward_fn)(void* ctx, uint8_t code," in HEADER


def test_status_codes_raise_the_exceptions_the_header_names() -> None:
    codes = dict(re.findall(r"\b(TTL_(?:OK|ERR_\w+))\s*=\s*(\d+)", HEADER))
    assert {k: int(v) for k, v in codes.items()} == {s.name: s.value for s in abi.STATUSES}
    assert int(codes["TTL_OK"]) == 0
    assert int(codes["TTL_ERR_CALLBACK"]) == N.CALLBACK_FAILED
    named = {int(v) for k, v in codes.items() if k.startswith("TTL_ERR_") and k != "TTL_ERR_CALLBACK"}
    assert named == set(N.ERRORS)
    assert N.ERRORS[int(codes["TTL_ERR_STATE"])] is N.StateError
    assert N.ERRORS[int(codes["TTL_ERR_PEER_GONE"])] is N.PeerGone
    assert N.ERRORS[int(codes["TTL_ERR_VALUE"])] is ValueError
    with pytest.raises(N.NativeFailure):
        N.check(N.CALLBACK_FAILED)


def test_a_table_entry_that_is_not_a_prototype_is_refused() -> None:
    with pytest.raises(ValueError, match="not a C prototype"):
        abi.fn("ttl_status ttl_broken")
    with pytest.raises(ValueError, match="by_address names no parameter"):
        abi.fn("int ttl_f(int a)", by_address=("b",))
    assert abi.parse_declaration("const char *  ttl_f( const ttl_db * db , size_t n )") == (
        "const char*", "ttl_f", (abi.Param("const ttl_db*", "db"), abi.Param("size_t", "n")))
