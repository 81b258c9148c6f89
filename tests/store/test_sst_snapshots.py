"""Snapshots made of SST files (checkpoint/sst_manifest.py, store/sst_snapshots.py): a snapshot
uploads only the files RocksDB wrote since the last one, a restore opens them, files no
snapshot names are deleted after a grace period and never before, and a snapshot whose files
are gone is passed over for an older base, never loaded partially."""

from __future__ import annotations

import logging
import os
import time

import pytest

from ttlstate import _native
from ttlstate.checkpoint import names, record_file
from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.checkpoint.record_file import (
    KIND_SNAPSHOT,
    SST_MANIFEST_FORMAT,
    RecordFileError,
    verify_record_file,
)
from ttlstate.checkpoint.sst_manifest import is_sst_file, read_manifest
from ttlstate.cli.inspect_checkpoint import inspect_store
from ttlstate.config.keys import EngineKind, SnapshotLayout
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.server import protocol as P
from ttlstate.store.key_filter_layout import first_layer_bits_log2
from ttlstate.store.provider import StoreProvider
from ttlstate.store.restored_keys import Kept
from ttlstate.ttl.clock import ManualClock

STORE = "op0/p0"


@pytest.fixture
def make(tmp_path):  # noqa: ANN001, ANN201
    made: list[StoreProvider] = []

    def make(layout: SnapshotLayout = SnapshotLayout.SST, engine: EngineKind = EngineKind.NATIVE,
             interval: int = 1000, ck: str = "ck", key_filter_max_keys: int = 10_000_000) -> StoreProvider:
        p = StoreProvider(STORE, str(tmp_path / f"local{len(made)}"),
                          LocalCheckpointLocation(str(tmp_path / ck)),
                          StoreConfig(TtlConfig(), engine, interval, layout,
                                      key_filter_max_keys=key_filter_max_keys), ManualClock(1000))
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def _batch(p: StoreProvider, version: int, keys: range, value: bytes = b"v") -> None:
    s = p.get_store(version)
    for k in keys:
        s.put(b"key-%08d" % k, value)
    s.commit()


def _ssts(p: StoreProvider) -> set[str]:
    return {n for n in os.listdir(p.checkpoint.directory) if is_sst_file(n)}


def _state(p: StoreProvider, version: int) -> dict[bytes, bytes]:
    return dict(p.get_store(version).iterator())


def _manifest(p: StoreProvider, version: int):  # noqa: ANN202
    path = os.path.join(p.checkpoint.directory, names.snapshot_name(version))
    header = verify_record_file(path, KIND_SNAPSHOT)
    assert header.format == SST_MANIFEST_FORMAT
    return read_manifest(path, header)


def test_a_snapshot_uploads_only_what_changed_and_restores_exactly(make) -> None:  # noqa: ANN001
    p = make()
    _batch(p, 0, range(0, 20_000))
    p.write_snapshot()
    first = _ssts(p)
    assert first and _manifest(p, 1).keys == 20_000
    _batch(p, 1, range(20_000, 25_000))
    p.write_snapshot()
    second = _ssts(p)
    assert first < second  # the first snapshot's files are shared, not uploaded again
    new = second - first
    sizes = {n: os.path.getsize(os.path.join(p.checkpoint.directory, n)) for n in second}
    assert sum(sizes[n] for n in new) < sum(sizes[n] for n in first)  # the change, not the state
    assert _manifest(p, 2).names == second
    fresh = make()
    assert _state(fresh, 2) == {b"key-%08d" % k: b"v" for k in range(25_000)}
    assert fresh.num_keys == 25_000


def test_changelogs_after_an_sst_snapshot_replay_on_the_opened_files(make) -> None:  # noqa: ANN001
    p = make()
    _batch(p, 0, range(0, 5000))
    p.write_snapshot()
    _batch(p, 1, range(5000, 6000))
    s = p.get_store(2)
    s.remove(b"key-%08d" % 0)
    s.put(b"key-%08d" % 1, b"new")
    s.commit()
    want = _state(p, 3)
    fresh = make()
    assert _state(fresh, 3) == want and fresh.num_keys == len(want) == 5999
    assert _state(fresh, 1) == {b"key-%08d" % k: b"v" for k in range(5000)}


def test_the_key_filter_bits_after_an_sst_restore_hold_every_key(make) -> None:  # noqa: ANN001
    """The shim's filter answers "absent" without asking the server: a key the bits miss would
    read as new. An SST restore scans the keys it did not build; the bits must equal those of a
    restore that collected them while building from record files."""
    bits = []
    for layout in (SnapshotLayout.SST, SnapshotLayout.RECORDS):
        p = make(layout, ck=layout.value)
        _batch(p, 0, range(0, 3000))
        p.write_snapshot()
        _batch(p, 1, range(3000, 3500))
        fresh = make(ck=layout.value)
        fresh.get_store(2)
        assert fresh.keep_restored_key_hashes(True) is not Kept.NONE
        bits.append(_scanned_bits(fresh, 2, first_layer_bits_log2(fresh.num_keys)))
    assert bits[0] is not None and bits[0] == bits[1]


@pytest.mark.parametrize("layout", [SnapshotLayout.SST, SnapshotLayout.RECORDS])
def test_the_kept_key_bits_give_the_shims_first_layer_and_no_larger(make, layout, caplog) -> None:  # noqa: ANN001
    """The server keeps only the bits of the layer the shim sizes for the restored version's
    keys: a smaller layer folds from them; a larger one (a shim sized otherwise) is refused with
    a warning, and the shim scans the keys itself (exact)."""
    p = make(layout, ck=layout.value)
    _batch(p, 0, range(0, 3000))
    p.write_snapshot()
    fresh = make(ck=layout.value)
    fresh.get_store(1)
    assert fresh.keep_restored_key_hashes(True) is not Kept.NONE
    first = first_layer_bits_log2(fresh.num_keys)
    assert len(_scanned_bits(fresh, 1, first - 2) or b"") == 1 << (first - 2 - 3)
    again = make(ck=layout.value)
    again.get_store(1)
    assert again.keep_restored_key_hashes(True) is not Kept.NONE
    with caplog.at_level(logging.WARNING, logger="ttlstate.store.restored_keys"):
        assert _scanned_bits(again, 1, first + 1) is None
    assert "the shim scans the keys itself" in caplog.text


@pytest.mark.parametrize("layout", [SnapshotLayout.SST, SnapshotLayout.RECORDS])
def test_key_hashes_the_shim_will_never_take_are_not_kept(make, layout) -> None:  # noqa: ANN001
    """A store past keyFilter.maxKeys gets no filter in the shim: its restore keeps (and scans)
    nothing. Hashes the shim did not take at the first load since they were done (its filter
    was dropped meanwhile) are dropped at the next: before, they stayed until the DB was."""
    p = make(layout, ck=layout.value)
    _batch(p, 0, range(0, 3000))
    p.write_snapshot()
    _batch(p, 1, range(3000, 3100))
    past = make(ck=layout.value, key_filter_max_keys=2999)
    past.get_store(1)
    assert past.keep_restored_key_hashes(True) is Kept.NONE and past._db.kept.current is None

    kept = make(ck=layout.value)
    store = kept.get_store(1)
    assert kept.keep_restored_key_hashes(True) is not Kept.NONE
    restored = kept._db.kept.current
    assert restored is not None and restored.wait(30)
    for version in (2, 3):  # the shim's next loads, none taking them (its filter gave up)
        store.put(b"new-%d" % version, b"v")
        store.commit()
        store = kept.get_store(version)
        assert kept.keep_restored_key_hashes(True) is Kept.NONE
        # Scanned: the shim asks at the first load after the scan ended (this one); collected
        # while building (READY): right after the restore's own load.
        assert (kept._db.kept.current is restored) == (version == 2 and layout is SnapshotLayout.SST)
    assert kept._db.kept.current is None
    assert kept.take_key_filter_bits(kept.lineage, 1, first_layer_bits_log2(3100), P.KEY_FILTER_PROBES) \
        is None


def _scanned_bits(p: StoreProvider, version: int, bits_log2: int) -> bytes | None:
    """take_key_filter_bits of the shim's probes until the scan has ended (b"" meanwhile)."""
    deadline = time.monotonic() + 30
    while ((bits := p.take_key_filter_bits(p.lineage, version, bits_log2, P.KEY_FILTER_PROBES)) == b""
           and time.monotonic() < deadline):
        time.sleep(0.02)
    return bits


def test_records_and_sst_snapshots_read_each_other(make) -> None:  # noqa: ANN001
    """Switching `snapshot.layout` (or the engine) on a running checkpoint loses nothing."""
    rec = make(SnapshotLayout.RECORDS)
    _batch(rec, 0, range(0, 1000))
    rec.write_snapshot()
    sst = make()
    _batch(sst, 1, range(1000, 2000))  # restored from the record snapshot
    sst.write_snapshot()
    _batch(sst, 2, range(2000, 2100))
    want = {b"key-%08d" % k: b"v" for k in range(2100)}
    assert _state(make(SnapshotLayout.RECORDS), 3) == want
    assert _state(make(engine=EngineKind.ROCKSDICT), 3) == want  # opens the native engine's files


def test_sst_files_no_snapshot_names_go_after_the_grace_period_only(make) -> None:  # noqa: ANN001
    p = make(interval=2)
    for v in range(12):
        _batch(p, v, range(v * 2000, (v + 1) * 2000))
        p.do_snapshot_maintenance()
        p.do_cleanup_maintenance(3)
        if v % 4 == 3:
            p.engine.compact()  # rewrites the files older snapshots named
    named = set().union(*(_manifest(p, f.version).names for f in names.parse_all(os.listdir(
        p.checkpoint.directory)) if f.kind == names.SNAPSHOT))
    orphans = _ssts(p) - named
    assert orphans, "compaction replaced files that older, deleted snapshots named"
    assert not orphans & set(p.do_cleanup_maintenance(3))  # seen unnamed just now: kept for now
    p.sst.grace_s = 0.0
    deleted = p.do_cleanup_maintenance(3)
    assert orphans <= set(deleted)
    assert _ssts(p) == named
    for v in range(10, 13):  # every retained version still loads, on a fresh executor
        assert len(_state(make(), v)) == v * 2000


def _snapshot_losing_a_file(p: StoreProvider, versions: int, per: int) -> str:
    """`versions` batches of `per` new keys, a snapshot of the last, then one of its SST files
    deleted; returns that file's name."""
    for v in range(versions):
        _batch(p, v, range(v * per, (v + 1) * per))
    p.write_snapshot()
    victim = sorted(_manifest(p, versions).names)[0]
    os.unlink(os.path.join(p.checkpoint.directory, victim))
    return victim


def test_a_snapshot_whose_files_are_gone_is_passed_over(make, caplog) -> None:  # noqa: ANN001
    p = make()
    victim = _snapshot_losing_a_file(p, 3, 1000)
    with caplog.at_level(logging.WARNING):
        assert len(_state(make(), 3)) == 3000  # from the changelogs instead
    assert victim in caplog.text and "passing it over" in caplog.text


def test_a_truncated_sst_file_is_refused_naming_it(make) -> None:  # noqa: ANN001
    p = make()
    _batch(p, 0, range(0, 1000))
    p.write_snapshot()
    victim = sorted(_manifest(p, 1).names)[0]
    path = os.path.join(p.checkpoint.directory, victim)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 10)
    for f in os.listdir(p.checkpoint.directory):  # nothing else can rebuild version 1
        if f.endswith(".changelog"):
            os.unlink(os.path.join(p.checkpoint.directory, f))
    with pytest.raises(CheckpointError, match=victim + ".*; it has .* bytes: truncated, corrupt"):
        make().get_store(1)


def test_an_sst_file_with_other_bytes_is_passed_over_and_named(make, caplog) -> None:  # noqa: ANN001
    """RocksDB would only find a flipped byte when a read reaches its block, mid-batch: the file
    is checked whole before the DB opens it."""
    p = make()
    for v in range(2):
        _batch(p, v, range(v * 1000, (v + 1) * 1000))
    p.write_snapshot()
    victim = sorted(_manifest(p, 2).names)[0]
    path = os.path.join(p.checkpoint.directory, victim)
    with open(path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with caplog.at_level(logging.WARNING):
        assert len(_state(make(), 2)) == 2000  # from the changelogs
    assert victim in caplog.text and "checksum mismatch" in caplog.text
    os.unlink(os.path.join(p.checkpoint.directory, "1.changelog"))
    with pytest.raises(CheckpointError, match=victim + ".*checksum mismatch"):
        make().get_store(2)


def test_a_manifest_is_not_a_record_file_of_entries(make, tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Format 2 tells every reader of record files that it names files: the native reader of
    entries, and a ttlstate that reads only format 1, refuse it rather than load file names as
    state."""
    p = make()
    _batch(p, 0, range(0, 10))
    p.write_snapshot()
    path = os.path.join(p.checkpoint.directory, names.snapshot_name(1))
    db = _native.DB(str(tmp_path / "db"))
    with pytest.raises(RuntimeError, match="format version 2"):
        db.apply_changelog_file(path)
    monkeypatch.setattr(record_file, "READABLE_FORMATS", (record_file.FORMAT_VERSION,))
    with pytest.raises(RecordFileError, match="has format version 2; this ttlstate reads 1"):
        verify_record_file(path, KIND_SNAPSHOT)  # as a ttlstate before SST snapshots reads it


@pytest.mark.parametrize("layout", list(SnapshotLayout))
def test_full_snapshot_cleanup_applies_to_record_snapshots_only(tmp_path, layout) -> None:  # noqa: ANN001
    """`cleanup.fullSnapshot` leaves expired entries out of a record snapshot (a rewrite of the
    state); an SST snapshot is the DB's files as they are (Flink: not for incremental
    checkpoints). Either way the expired entries never read back."""
    clock = ManualClock(1000)
    p = StoreProvider(STORE, str(tmp_path / "fs"), LocalCheckpointLocation(str(tmp_path / "ck")),
                      StoreConfig(TtlConfig(ttl_ms=100, full_snapshot=True), EngineKind.NATIVE, 1000,
                                  layout), clock)
    try:
        s = p.get_store(0, now_ms=1000)
        for k in range(10):
            s.put(b"%d" % k, b"v")
        s.commit()
        s = p.get_store(1, now_ms=1150)  # the first ten expired at 1100
        s.put(b"fresh", b"v")
        s.commit()
        p.write_snapshot()
        path = os.path.join(p.checkpoint.directory, "2.snapshot")
        header = verify_record_file(path, KIND_SNAPSHOT)
        if layout is SnapshotLayout.SST:
            assert header.format == SST_MANIFEST_FORMAT and read_manifest(path, header).keys == 11
        else:
            assert header.format != SST_MANIFEST_FORMAT and header.record_count == 1
    finally:
        p.close()
    fresh = StoreProvider(STORE, str(tmp_path / "fresh"), LocalCheckpointLocation(str(tmp_path / "ck")),
                          StoreConfig(TtlConfig(ttl_ms=100), EngineKind.NATIVE, 1000), clock)
    try:
        assert list(dict(fresh.get_store(2, now_ms=1200).iterator())) == [b"fresh"]
    finally:
        fresh.close()


def test_inspect_counts_sst_files_and_names_a_missing_one(tmp_path) -> None:  # noqa: ANN001
    ck = tmp_path / "ck"
    p = StoreProvider(store_label("0", "0", "default"), str(tmp_path / "local"),
                      LocalCheckpointLocation(str(ck)), StoreConfig(TtlConfig(), EngineKind.NATIVE, 1000),
                      ManualClock(1000))
    try:
        _batch(p, 0, range(0, 2000))
        p.write_snapshot()
        _batch(p, 1, range(2000, 2100))
    finally:
        p.close()
    report = inspect_store("0", "0", "default", str(ck), 1000, None)
    assert report.rows == 2100 and not report.problems
    assert report.bytes == sum(f.stat().st_size for f in ck.iterdir() if not f.name.startswith("."))
    victim = next(f for f in ck.iterdir() if is_sst_file(f.name))
    victim.unlink()
    report = inspect_store("0", "0", "default", str(ck), 1000, None)
    assert any(f"names SST file {victim}, which is missing" in p for p in report.problems)
    assert report.rows == 2100  # rebuilt from the changelogs instead


def test_a_snapshot_asked_for_by_name_with_files_gone_fails_naming_them(make) -> None:  # noqa: ANN001
    """The state data source's snapshotStartBatchId: no other base will do."""
    victim = _snapshot_losing_a_file(make(), 2, 100)
    with pytest.raises(CheckpointError, match=victim + ", which is missing"):
        make().get_store(2, from_snapshot=2)


@pytest.mark.parametrize("layout", list(SnapshotLayout))
def test_a_replay_counts_keys_from_the_next_changelog_and_exactly(make, layout, monkeypatch) -> None:  # noqa: ANN001
    """Every changelog but the last is replayed without lookups: the next one recorded the
    number of keys it was written on. The count stays exact, puts of present keys and removes
    included; only the last changelog's keys are looked up."""
    p = make(layout)
    _batch(p, 0, range(0, 3000))
    p.write_snapshot()
    for v in range(1, 4):
        s = p.get_store(v)
        for k in range(v * 100, v * 100 + 50):
            s.remove(b"key-%08d" % k)
        for k in range(2900, 3100 + v * 10):  # some present, some new
            s.put(b"key-%08d" % k, b"x")
        s.commit()
    want = p.num_keys
    counted: list[bool] = []
    probe = make(layout)
    probe.get_store(0)
    plane_type = type(probe.plane)
    real = plane_type.replay_changelog

    def spy(self, engine, local_path, header, collecting, count_keys=True):  # noqa: ANN001, ANN202
        counted.append(count_keys)
        return real(self, engine, local_path, header, collecting, count_keys)

    monkeypatch.setattr(plane_type, "replay_changelog", spy)
    fresh = make(layout)
    assert len(_state(fresh, 4)) == want == fresh.num_keys == fresh.engine.count_keys()
    # (a record snapshot is built in one pass with the changelogs after it: no replay at all)
    assert counted == ([False, False, True] if layout is SnapshotLayout.SST else [])


def test_a_shared_file_deleted_meanwhile_is_uploaded_again(make) -> None:  # noqa: ANN001
    """Another writer's retention may delete a file this DB still holds once no snapshot names
    it: the next snapshot uploads it again rather than name a file that is not there."""
    p = make()
    _batch(p, 0, range(0, 1000))
    p.write_snapshot()
    shared = sorted(_manifest(p, 1).names)[0]
    os.unlink(os.path.join(p.checkpoint.directory, names.snapshot_name(1)))
    os.unlink(os.path.join(p.checkpoint.directory, shared))
    _batch(p, 1, range(1000, 1100))
    p.write_snapshot()
    assert shared in _manifest(p, 2).names and shared in _ssts(p)
    for f in os.listdir(p.checkpoint.directory):
        if f.endswith(".changelog"):
            os.unlink(os.path.join(p.checkpoint.directory, f))
    assert len(_state(make(), 2)) == 1100  # from the snapshot's files alone


def test_a_close_stops_a_running_key_scan(make) -> None:  # noqa: ANN001
    """Nothing waits for a scan: closing the store (or dropping its local DB for a reload)
    stops it within a few thousand keys, and it ends with the DB's error, ignored."""
    p = make(ck="closing-scan")
    _batch(p, 0, range(0, 200_000))
    p.write_snapshot()
    fresh = make(ck="closing-scan")
    fresh.get_store(1)
    assert fresh.keep_restored_key_hashes(True) is Kept.SCANNING
    scan = fresh.restored_keys
    assert scan is not None
    fresh.close()
    assert scan.wait(timeout=10)  # ended, not left running on a closed DB


def test_a_failed_key_scan_gives_no_bits_and_the_store_serves_on(make, monkeypatch) -> None:  # noqa: ANN001
    """A scan that fails (a file it cannot read) is not the restore's failure: the shim is told
    there are no bits and scans the keys itself."""
    p = make(ck="failing-scan")
    _batch(p, 0, range(0, 2000))
    p.write_snapshot()
    fresh = make(ck="failing-scan")
    fresh.get_store(1)

    def broken(hashes):  # noqa: ANN001, ANN202
        raise RuntimeError("key hashes: IO error: no such file")

    monkeypatch.setattr(fresh.engine, "add_key_hashes", broken)
    assert fresh.keep_restored_key_hashes(True) is Kept.SCANNING  # from now on
    assert _scanned_bits(fresh, 1, first_layer_bits_log2(fresh.num_keys)) is None
    assert _state(fresh, 1) == {b"key-%08d" % k: b"v" for k in range(2000)}
