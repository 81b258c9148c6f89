// The native engine's C ABI: what python/ttlstate/_native.py binds with ctypes.
//
// A plain C ABI (rather than a CPython extension) makes one shared library serve every Python
// version: nothing here depends on the interpreter's ABI. The declarations (functions, status
// codes, handles) are generated at build time from their one definition,
// python/ttlstate/_native_abi.py, which the Python binding reads too (ttlstate.codegen; setup.py
// writes them under build/generated/include). Conventions:
// - Objects are opaque handles, created by a function of the API and freed by its ttl_*_free.
// - Every function that can fail returns a ttl_status; on failure ttl_last_error() is the
//   message (thread-local, valid until the thread's next call).
// - Bytes returned by a call are in a thread-local buffer, valid until the thread's next call:
//   `const char** data, size_t* size` out-parameters point into it.
// - Single values on the per-entry paths (ttl_*_get_into) are copied into the caller's buffer
//   instead, with no status: they return the size, -1 for none, -2 on failure (then
//   ttl_last_status); a value larger than the buffer is kept for ttl_take.
// - Lists, both ways: [u32 count][u32 offsets, count + 1, from the list's start][u8 present,
//   count][the entries' bytes], little-endian; an absent entry (None) is empty. A pair is two
//   entries.
// - Optional arguments: a NULL pointer means None.
#pragma once

#include "ttlstate/generated/c_api_functions.h"
