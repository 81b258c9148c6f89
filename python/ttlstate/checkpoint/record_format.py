"""The record file's format numbers and record ops (the layout: record_file.py), in a module of
their own: the build generates the native data plane's copy of them (ttlstate.codegen) with
nothing of the runtime installed."""

from __future__ import annotations

FORMAT_VERSION = 1
SST_MANIFEST_FORMAT = 2  # a snapshot whose records name SST files (sst_manifest.py)
APPENDS_FORMAT = 3  # a changelog that holds appends
OP_PUT = 1
OP_DELETE = 2
OP_APPEND = 3
