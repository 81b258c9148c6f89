"""`snapshot.localFill` (store/local_fill.py): after a restore in place through the shim, the
placeholders' files are copied to the local disk in the background, checked whole, and read
there from then on, by the readers RocksDB holds open too; within `snapshot.localMaxBytes`; a
damaged copy is found and repaired; an unreachable file system leaves the files read in place.
The checkpoint's files are never changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from tests.range_service import served_provider, without_metadata_warm_up
from tests.store.test_checkpoint_damage import VERSIONS, expected, only_in
from tests.store.test_in_place import sst_files
from tests.store.test_in_place_ranges import ROOT, fresh_reader, placeholders, served  # noqa: F401

from ttlstate import faults
from ttlstate.store import metric_names as M
from ttlstate.store.local_cache import local_sst_bytes
from ttlstate.store.local_fill import FILLS
from ttlstate.store.provider import StoreProvider


def local_ssts(p: StoreProvider) -> dict[str, int]:
    """The local DB's SST files: name -> size."""
    return {n: os.path.getsize(os.path.join(p.db_dir, n)) for n in os.listdir(p.db_dir) if n.endswith(".sst")}


def test_the_restored_files_come_to_the_local_disk_and_read_exactly(served, tmp_path) -> None:  # noqa: ANN001, F811
    ck, service = served
    before = sst_files(ck.directory)
    fresh = fresh_reader(ck, tmp_path, service, local_fill=True)
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    assert FILLS.idle(60)
    assert placeholders(fresh) == {}  # none read in place any more
    ssts = local_ssts(fresh)
    assert local_sst_bytes(fresh.db_dir).keys() == ssts.keys()  # all on the local disk
    metrics = fresh.drain_metrics()
    assert metrics[M.LOCAL_SST_FILES_FILLED.name] == metrics[M.SST_FILES_READ_IN_PLACE.name] == len(ssts)
    assert metrics[M.LOCAL_SST_BYTES_FILLED.name] == sum(ssts.values())
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    ck.commit(fresh, VERSIONS)  # a snapshot on top names the filled files without uploading them
    assert set(sst_files(ck.directory)) - set(before) == {  # only the version's own flush
        f.name for f in fresh.sst.uploaded_files().values() if f.name not in before}
    assert len(set(sst_files(ck.directory)) - set(before)) == 1
    assert all(sst_files(ck.directory)[n] == seen for n, seen in before.items())  # never changed
    assert ck.state(fresh, VERSIONS + 1) == expected(VERSIONS + 1)
    fresh.close()


def test_the_readers_rocksdb_holds_open_read_the_local_copy(served, tmp_path) -> None:  # noqa: ANN001, F811
    """In a process of its own (this one's block cache may hold the blocks): the restore opens
    every file (RocksDB keeps its readers), the fill copies them, the file system goes down,
    and every read of the version still succeeds, from the local disk."""
    ck, _service = served
    run = subprocess.run([sys.executable, "-c", _FILL_THEN_DOWN, ck.directory, str(tmp_path / "filled"),
                          str(VERSIONS)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    exact, in_place_reads, local_reads = json.loads(run.stdout.splitlines()[-1])
    assert exact and in_place_reads == 0 and local_reads > 0


_FILL_THEN_DOWN = """
import json, sys
from tests.store.test_local_fill import fill_then_down
print(json.dumps(fill_then_down(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
"""


def fill_then_down(checkpoint_dir: str, local_dir: str, version: int) -> tuple[bool, int, int]:
    """(whether the version read exactly with the file system down after the fill, the reads of
    it in place then, and of the local disk)."""
    without_metadata_warm_up()
    service, p = served_provider(checkpoint_dir, local_dir, local_fill=True)
    p.get_store(version, now_ms=1_000 + version)  # opened: footers and indexes read
    assert FILLS.idle(60)
    p.drain_metrics()
    service.failing = "java.net.ConnectException: Connection refused (HDFS down)"
    exact = dict(p.get_store(version, now_ms=1_000 + version).iterator()) == expected(version)
    metrics = p.drain_metrics()
    p.close()
    service.stop()
    return exact, metrics[M.IN_PLACE_RANGE_READS.name], metrics[M.IN_PLACE_LOCAL_READS.name]


def test_the_fill_keeps_to_the_local_bound(served, tmp_path) -> None:  # noqa: ANN001, F811
    ck, service = served
    probe = fresh_reader(ck, tmp_path, service, "probe")
    probe.get_store(VERSIONS, now_ms=1_000 + VERSIONS)
    sizes = local_ssts(probe)
    probe.close()
    assert len(sizes) >= 2, sizes
    bound = sum(sizes.values()) - min(sizes.values())  # all but one fit
    fresh = fresh_reader(ck, tmp_path, service, local_fill=True, local_max_bytes=bound)
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    assert FILLS.idle(60)
    local = local_sst_bytes(fresh.db_dir)
    assert 0 < sum(os.path.getsize(os.path.join(fresh.db_dir, n)) for n in local) <= bound
    assert len(placeholders(fresh)) == len(sizes) - len(local) >= 1
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    fresh.close()


def test_a_damaged_file_is_found_by_the_fill_and_the_next_load_repairs(
        served, tmp_path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001, F811
    ck, service = served
    newest = ck.name(ck.newest_snapshot(), "snapshot")
    victim = only_in(ck, newest)
    path = os.path.join(ck.directory, victim)
    with open(path, "r+b") as out:  # a data block's byte: RocksDB's open reads none of them
        out.seek(10)
        byte = out.read(1)
        out.seek(10)
        out.write(bytes([byte[0] ^ 0xFF]))
    fresh = fresh_reader(ck, tmp_path, service, local_fill=True)
    fresh.get_store(VERSIONS, now_ms=1_000 + VERSIONS)  # opens in place: the damage is not read yet
    assert FILLS.idle(60)
    assert victim in fresh.sst.damaged and "checksum mismatch" in fresh.sst.damaged[victim]
    assert os.path.basename(next(iter(placeholders(fresh).values()))) == victim  # it stays read in place
    assert "passes over every snapshot naming it" in caplog.text and victim in caplog.text
    fresh.drain_metrics()
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)  # the next load repairs
    assert fresh.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 1
    fresh.close()


def test_an_unreachable_file_system_leaves_the_files_read_in_place(
        served, tmp_path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001, F811
    ck, service = served

    def down() -> None:
        service.failing = "java.net.ConnectException: Connection refused (HDFS down)"

    faults.on_point("local-fill", down)
    try:
        fresh = fresh_reader(ck, tmp_path, service, local_fill=True)
        fresh.get_store(VERSIONS, now_ms=1_000 + VERSIONS)
        assert FILLS.idle(60)
    finally:
        faults.on_point("local-fill", None)
        service.failing = None
    assert "stays read in place" in caplog.text and "Connection refused" in caplog.text
    restored = fresh.drain_metrics()
    assert restored[M.LOCAL_SST_FILES_FILLED.name] == 0
    assert len(placeholders(fresh)) == restored[M.SST_FILES_READ_IN_PLACE.name] > 0
    for n in placeholders(fresh):  # a copy stopped halfway keeps no block
        assert os.stat(os.path.join(fresh.db_dir, n)).st_blocks == 0
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    assert fresh.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 0
    fresh.close()


def test_a_fill_stops_when_the_store_is_dropped(served, tmp_path) -> None:  # noqa: ANN001, F811
    """The DB is dropped while the fill waits: nothing is filled, and the next restore in the
    same directory fills its own placeholders."""
    ck, service = served
    fresh = fresh_reader(ck, tmp_path, service, local_fill=True)
    loaded = threading.Event()
    dropped: list[bool] = []

    def drop() -> None:
        if not dropped:
            dropped.append(True)
            assert loaded.wait(60)
            with fresh._ctx.lock:  # noqa: SLF001
                fresh._db.drop()  # noqa: SLF001  (as a failed load drops it)

    faults.on_point("local-fill", drop)
    try:
        fresh.get_store(VERSIONS, now_ms=1_000 + VERSIONS)
        loaded.set()
        assert FILLS.idle(60)
    finally:
        faults.on_point("local-fill", None)
    assert fresh.drain_metrics()[M.LOCAL_SST_FILES_FILLED.name] == 0
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)  # restored again, and filled
    assert FILLS.idle(60)
    assert placeholders(fresh) == {}
    fresh.close()


def test_the_fill_is_off_with_the_key(served, tmp_path) -> None:  # noqa: ANN001, F811
    ck, service = served
    fresh = fresh_reader(ck, tmp_path, service, local_fill=False)
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    assert FILLS.idle(60)
    assert len(placeholders(fresh)) == fresh.drain_metrics()[M.SST_FILES_READ_IN_PLACE.name] > 0
