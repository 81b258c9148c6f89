"""The Engine contract, on both engines: what the store relies on."""

from __future__ import annotations

import struct

import pytest

from ttlstate.config.keys import EngineKind
from ttlstate.engine.base import Engine, FilterSettings
from ttlstate.engine.select import native_available, open_engine
from ttlstate.errors import EngineUnavailable


@pytest.fixture(params=[EngineKind.NATIVE, EngineKind.ROCKSDICT], ids=lambda k: k.value)
def engine(request, tmp_path) -> Engine:  # noqa: ANN001
    e = open_engine(request.param, str(tmp_path / "db"), None)
    yield e
    e.close()


def test_native_extension_is_built() -> None:
    assert native_available(), "make setup builds ttlstate._native; the default engine needs it"


def test_put_get_delete_in_order(engine: Engine) -> None:
    engine.write([(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"")])
    assert engine.get(b"a") is None and engine.get(b"b") == b"2" and engine.get(b"c") == b""
    assert engine.multi_get([b"a", b"b", b"zz"]) == [None, b"2", None]
    assert engine.multi_get([]) == []


def test_iteration_is_bounded_sorted_and_point_in_time(engine: Engine) -> None:
    engine.write([(bytes([i]), b"v%d" % i) for i in range(0, 200, 3)])
    it = engine.iterate(bytes([10]), bytes([100]))
    first = next(it)
    engine.write([(bytes([50]), b"new"), (bytes([12]), None)])  # after the iterator started
    rest = list(it)
    keys = [first[0]] + [k for k, _ in rest]
    assert keys == [bytes([i]) for i in range(12, 100, 3)]
    assert bytes([50]) not in keys
    assert [k for k, _ in engine.iterate(bytes([10]), bytes([14]))] == []  # 12 deleted now


def test_large_values_and_counts(engine: Engine) -> None:
    big = b"x" * (8 << 20)
    engine.write([(b"big", big)] + [(b"k%05d" % i, b"v") for i in range(3000)])
    assert engine.get(b"big") == big
    assert engine.count_keys() == 3001
    engine.compact()
    assert engine.disk_bytes() > 0


def test_native_engine_filter_removes_expired_on_compaction(tmp_path) -> None:  # noqa: ANN001
    e = open_engine(EngineKind.NATIVE, str(tmp_path / "db"), FilterSettings(ttl_ms=100))
    assert e.has_compaction_filter
    e.write([(b"old", struct.pack(">q", 1000) + b"v"), (b"new", struct.pack(">q", 1050) + b"v")])
    e.set_time(1100)
    e.compact()
    assert e.get(b"old") is None and e.get(b"new") is not None
    assert e.metrics()["filter_removed"] == 1
    e.close()


def test_auto_prefers_native_and_native_missing_is_a_clear_error(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    e = open_engine(EngineKind.AUTO, str(tmp_path / "a"), None)
    assert e.kind == "native"
    e.close()
    import ttlstate.engine.select as select

    monkeypatch.setattr(select, "native_available", lambda: False)
    with pytest.raises(EngineUnavailable, match="engine 'native' was requested.*make setup"):
        select.open_engine(EngineKind.NATIVE, str(tmp_path / "b"), None)
    fallback = select.open_engine(EngineKind.AUTO, str(tmp_path / "c"), None)
    assert fallback.kind == "rocksdict"
    fallback.close()
