"""ttlstate.codegen: the Scala objects and C++ headers it emits carry Python's values (the
compiled shim and native module are checked against Python in test_cross_language.py), and a
rerun leaves unchanged files untouched, so builds depending on them stay fresh."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ttlstate.codegen import __main__ as codegen
from ttlstate.codegen import cpp, scala
from ttlstate.config import keys as K
from ttlstate.server import protocol as P
from ttlstate.store.metric_names import ALL_METRICS


def test_scala_protocol_has_every_constant() -> None:
    text = scala.protocol()
    found = dict(re.findall(r"val (\w+): Int = (-?\d+)", text))
    assert found == {k: str(v) for k, v in P.constants().items()}


def test_scala_conf_keys_and_metrics_have_every_name() -> None:
    keys = scala.conf_keys()
    assert all(f'"{k.suffix}"' in keys for k in K.ALL_KEYS)
    assert f'val TTL: String = PREFIX + "{K.TTL.suffix}"' in keys
    metrics = scala.metric_names()
    assert all(f'"{m.name}"' in metrics and f'"{m.kind}"' in metrics for m in ALL_METRICS)


def test_cpp_protocol_types_follow_the_wire_widths() -> None:
    text = cpp.protocol()
    assert f"constexpr uint8_t kOpIterNext = {P.OP_ITER_NEXT};" in text
    assert f"constexpr uint16_t kErrEngine = {P.ERR_ENGINE};" in text
    assert f"constexpr uint32_t kMaxFrame = {P.MAX_FRAME};" in text
    assert len(re.findall(r"^constexpr ", text, re.M)) == len(P.constants())
    # ...and all of them by name, for ttl_constants (the cross-language test reads them back)
    assert dict(re.findall(r'^    \{"(\w+)", (\w+)\},$', text, re.M)) == {
        n: "k" + "".join(part.capitalize() for part in n.lower().split("_")) for n in P.constants()}


def test_cpp_c_api_declares_every_function_of_the_table() -> None:
    from ttlstate import _native_abi as abi

    text = cpp.c_api_functions()
    assert all(f"TTL_API {f.declaration};" in text for f in abi.FUNCTIONS)
    assert "typedef int (*ttl_forward_fn)(" in text and text.count("TTL_API ") == len(abi.FUNCTIONS) + 1


def test_a_rerun_leaves_unchanged_files_untouched(tmp_path: Path) -> None:
    paths = codegen.write("cpp", str(tmp_path))
    for p in paths:
        os.utime(p, (1, 1))
    assert codegen.write("cpp", str(tmp_path)) == paths
    assert all(os.stat(p).st_mtime == 1 for p in paths)
    Path(paths[0]).write_text("stale")
    codegen.write("cpp", str(tmp_path))
    assert Path(paths[0]).read_text() == cpp.protocol()


def test_an_unknown_target_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown codegen target 'java': allowed scala, cpp"):
        codegen.write("java", "/nonexistent")
