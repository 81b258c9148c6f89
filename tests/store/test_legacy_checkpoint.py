"""Checkpoints written by ttlstate 0.1 (the pure-Python data plane; tests/data/checkpoint-0.1)
load on both data planes, give exactly the state 0.1 saw, and can be continued; and files each
data plane writes are read by the other."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "checkpoint-0.1")
ENGINES = [EngineKind.NATIVE, EngineKind.ROCKSDICT]


def _expected() -> dict:
    with open(os.path.join(DATA, "expected-v4-at-batch-time.json")) as f:
        return json.load(f)


def _provider(tmp_path, engine: EngineKind, ck: str, local: str) -> StoreProvider:  # noqa: ANN001
    exp = _expected()
    return StoreProvider(exp["store"], str(tmp_path / local), LocalCheckpointLocation(ck),
                         StoreConfig(TtlConfig(ttl_ms=exp["ttl_ms"]), engine, snapshot_interval=2),
                         ManualClock(0))


@pytest.mark.parametrize("engine", ENGINES, ids=lambda e: e.value)
@pytest.mark.parametrize("from_snapshot", [True, False], ids=["snapshot+changelogs", "changelogs"])
def test_a_0_1_checkpoint_loads_exactly(tmp_path, engine: EngineKind, from_snapshot: bool) -> None:  # noqa: ANN001
    ck = str(tmp_path / "ck")
    shutil.copytree(os.path.join(DATA, "state", "0", "0"), ck)
    if not from_snapshot:
        os.unlink(os.path.join(ck, "2.snapshot"))
    exp = _expected()
    p = _provider(tmp_path, engine, ck, "local")
    s = p.get_store(exp["version"], now_ms=exp["now_ms"])
    assert {k.decode(): v.decode() for k, v in s.iterator()} == exp["visible"]
    assert p.num_keys == exp["num_keys"]
    s.put(b"new", b"value")
    assert s.commit() == 5
    p.close()
    again = _provider(tmp_path, engine, ck, "again")  # the new file is read with the 0.1 ones
    s = again.get_store(5, now_ms=exp["now_ms"])
    assert s.get(b"new") == b"value" and len(dict(s.iterator())) == len(exp["visible"]) + 1
    again.close()


@pytest.mark.parametrize("writer,reader", [(ENGINES[0], ENGINES[1]), (ENGINES[1], ENGINES[0])],
                         ids=["native-to-rocksdict", "rocksdict-to-native"])
def test_each_data_plane_reads_the_others_files(tmp_path, writer: EngineKind, reader: EngineKind) -> None:  # noqa: ANN001
    ck = str(tmp_path / "ck")
    w = _provider(tmp_path, writer, ck, "w")
    expected: dict[bytes, bytes] = {}
    for v in range(5):
        s = w.get_store(v, now_ms=10_000 + v)
        for i in range(v * 300, v * 300 + 500):
            key, value = b"k%06d" % i, os.urandom(i % 40)
            s.put(key, value)
            expected[key] = value
        for i in range(v * 300, v * 300 + 100, 3):
            s.remove(b"k%06d" % i)
            expected.pop(b"k%06d" % i, None)
        s.commit()
        if v == 2:
            assert w.write_snapshot() == "3.snapshot"
    w.close()
    r = _provider(tmp_path, reader, ck, "r")
    s = r.get_store(5, now_ms=10_004)
    assert dict(s.iterator()) == expected and r.num_keys == len(expected)
    r.close()
