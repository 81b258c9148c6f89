"""SST snapshots restored in place on a checkpoint only the shim reaches (HDFS, S3A): the local
DB holds placeholders, RocksDB reads their blocks as ranges the range service serves
(tests/range_service.py stands in for the shim's), the checkpoint's files are never changed, the
next snapshot names them without uploading them, an unreachable file system fails the read
naming the file and a retry restores exactly, and damage is repaired as the copying restore
repairs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests.range_service import (
    RangeService,
    Served,
    served_provider,
    short_socket_path,
    without_metadata_warm_up,
)
from tests.store.test_checkpoint_damage import VERSIONS, Checkpoint, expected
from tests.store.test_in_place import commit_on_top_changing_nothing, sst_files

from ttlstate import _native
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.checkpoint.record_file import verify_record_file
from ttlstate.checkpoint.sst_manifest import read_manifest
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store import metric_names as M
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def placeholders(p: StoreProvider) -> dict[str, str]:
    """The local DB's SST files read in place: local name -> the checkpoint file."""
    out = {}
    for n in os.listdir(p.db_dir):
        source = _native.mapped_file_source(os.path.join(p.db_dir, n))
        if source is not None:
            out[n] = source
    return out


def fresh_reader(ck: Checkpoint, tmp_path, service: RangeService, name: str = "fresh",  # noqa: ANN001
                 local_fill: bool = False, local_max_bytes: int = 0) -> StoreProvider:
    """A fresh executor's provider over `ck` (its placeholders stay so unless `local_fill`)."""
    cfg = StoreConfig(TtlConfig(), EngineKind.NATIVE, 2, snapshot_read_in_place=True,
                      snapshot_local_fill=local_fill, snapshot_local_max_bytes=local_max_bytes)
    return StoreProvider("op0/p0", str(tmp_path / name),
                         Served(LocalCheckpointLocation(ck.directory), service.socket_path),  # type: ignore[arg-type]
                         cfg, ManualClock(1000))


@pytest.fixture
def served(tmp_path, make_sst_provider):  # noqa: ANN001, ANN201
    """A checkpoint written as a query writes it, and a range service over its folder."""
    ck = Checkpoint(make_sst_provider, ids=False)
    service = RangeService(ck.directory, short_socket_path(str(tmp_path), "ranges.sock"))
    yield ck, service
    service.stop()


def test_a_restore_reads_ranges_of_the_checkpoints_files_and_never_changes_them(served, tmp_path) -> None:  # noqa: ANN001
    ck, service = served
    before = sst_files(ck.directory)
    fresh = fresh_reader(ck, tmp_path, service)
    reads_before = _native.mapped_reads()["requests"]
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    mapped = placeholders(fresh)
    assert mapped and all(os.path.dirname(uri) == ck.directory for uri in mapped.values()), mapped
    for n in mapped:  # nothing of them on the local disk
        assert os.stat(os.path.join(fresh.db_dir, n)).st_blocks == 0
    metrics = fresh.drain_metrics()
    assert metrics[M.SST_FILES_READ_IN_PLACE.name] == len(mapped)
    # This store's reads so far (RocksDB's background jobs may read on meanwhile: not equal).
    reads, read_bytes = metrics[M.IN_PLACE_RANGE_READS.name], metrics[M.IN_PLACE_RANGE_READ_BYTES.name]
    assert 0 < reads <= service.requests and 0 < read_bytes <= service.bytes
    assert _native.mapped_reads()["requests"] - reads_before >= reads

    commit_on_top_changing_nothing(ck, fresh, before)
    fresh.close()
    again = fresh_reader(ck, tmp_path, service, "again")
    assert ck.state(again, VERSIONS + 6) == expected(VERSIONS + 6)
    again.close()


@pytest.mark.parametrize("warmed", [True, False], ids=["warmed", "not-warmed"])
def test_a_restore_reads_every_files_index_and_filter_so_the_first_lookups_read_none(
        make_sst_provider, tmp_path, warmed: bool) -> None:  # noqa: ANN001
    """The load reads each placeholder's index and filter blocks (several at a time), so the
    batch's lookups of absent keys, which need nothing else, read nothing remote; without that
    (`not-warmed`, the engine's warm-up made a no-op) the same lookups read them one by one.
    The files are compacted, of 40k keys: their filters are larger than what RocksDB reads of a
    file's end when it opens it (a flush's small file is read whole at once). The restore runs
    in a process of its own: this one's block cache, shared by its DBs, holds the writer's."""
    writer = make_sst_provider(snapshot_interval=1)
    s = writer.get_store(0, now_ms=1_000)
    for i in range(0, 80_000, 2):
        s.put(b"key-%06d" % i, b"v")
    assert s.commit() == 1
    writer._db.engine.compact()  # noqa: SLF001  (the version's files at the bottom level)
    s = writer.get_store(1, now_ms=1_001)
    s.put(b"key-x", b"v")
    assert s.commit() == 2
    writer.do_snapshot_maintenance()
    directory = writer.checkpoint.directory
    writer.close()
    run = subprocess.run([sys.executable, "-c", _FIRST_LOOKUPS, directory, str(tmp_path / "fresh"),
                          str(warmed)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    files, read = json.loads(run.stdout.splitlines()[-1])
    assert files > 0
    assert (read == 0) if warmed else (read >= files), (files, read)


_FIRST_LOOKUPS = """
import json, sys
from tests.store.test_in_place_ranges import first_lookups_read
print(json.dumps(first_lookups_read(sys.argv[1], sys.argv[2], sys.argv[3] == "True")))
"""


def first_lookups_read(checkpoint_dir: str, local_dir: str, warmed: bool) -> tuple[int, int]:
    """A fresh executor's restore of version 2 in place, then lookups of absent keys within the
    files' key range (odd numbers): (files read in place, ranges those lookups read)."""
    if not warmed:
        without_metadata_warm_up()
    service, p = served_provider(checkpoint_dir, local_dir)
    try:
        store = p.get_store(2, now_ms=1_002)
        before = service.requests
        absent = [b"key-%06d" % i for i in range(1, 1_000, 20)]  # fixed: so are the filters' answers
        assert [store.get(k) for k in absent] == [None] * len(absent)
        read = service.requests - before
        files = len(placeholders(p))
        store.abort()
        return files, read
    finally:
        p.close()
        service.stop()


def test_the_next_snapshot_names_the_placeholders_without_uploading_them(served, tmp_path) -> None:  # noqa: ANN001
    ck, service = served
    newest = os.path.join(ck.directory, ck.name(ck.newest_snapshot(), "snapshot"))
    restored_from = read_manifest(newest, verify_record_file(newest, b"S")).names
    fresh = fresh_reader(ck, tmp_path, service)
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    before = sst_files(ck.directory)
    ck.commit(fresh, VERSIONS)  # a snapshot: the checkpoint of the local DB hard-links the placeholders
    snapshot = os.path.join(ck.directory, ck.name(VERSIONS + 1, "snapshot"))
    names = read_manifest(snapshot, verify_record_file(snapshot, b"S")).names
    assert restored_from <= names
    new = set(sst_files(ck.directory)) - set(before)
    assert new == names - restored_from and len(new) == 1, new  # only the version's own flush
    assert all(sst_files(ck.directory)[n] == seen for n, seen in before.items())  # no zeros uploaded
    fresh.close()


def test_an_unreachable_file_system_fails_the_read_naming_the_file_and_a_retry_restores(
        served, tmp_path) -> None:  # noqa: ANN001
    """At the restore (opening the files) and after it (a task reading blocks): the task fails
    with the cause the shim reported and the checkpoint file; once it is back, the retry reads
    the version exactly, the files checked whole first (the retry of the restore's version)."""
    ck, service = served
    service.failing = "java.net.ConnectException: Connection refused (HDFS down)"
    fresh = fresh_reader(ck, tmp_path, service)
    with pytest.raises(Exception, match="Connection refused") as e:
        ck.state(fresh, VERSIONS)
    assert ck.directory in str(e.value), str(e.value)
    service.failing = None
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)

    fresh.close()
    # After the restore, in a process of its own (this one's block cache holds every block now).
    run = subprocess.run([sys.executable, "-c", _READ_WHILE_DOWN, ck.directory, str(tmp_path / "later"),
                          str(VERSIONS)], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    first, retry_down, exact, read_whole, repaired = json.loads(run.stdout.splitlines()[-1])
    assert "Connection refused" in first and "in place from " + ck.directory in first, first
    assert retry_down.startswith("JvmCheckpointIOError: "), retry_down  # a checkpoint error for the shim
    assert "cannot be read to check it whole" in retry_down and "Connection refused" in retry_down, retry_down
    assert exact and read_whole and repaired == 0


_READ_WHILE_DOWN = """
import json, sys
from tests.store.test_in_place_ranges import read_while_down
print(json.dumps(read_while_down(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
"""


def read_while_down(checkpoint_dir: str, local_dir: str, version: int) -> tuple[str, str, bool, bool, int]:
    """A fresh executor's restore of `version` through a range service, whose file system goes
    down once the files are open: (the task's error, its retry's while still down, whether the
    next retry read the version exactly, whether it read the files whole first, repairs)."""
    without_metadata_warm_up()
    service, p = served_provider(checkpoint_dir, local_dir)
    store = p.get_store(version, now_ms=1_000 + version)  # opened: footers and indexes read
    service.failing = "java.net.ConnectException: Connection refused (HDFS down)"
    try:
        dict(store.iterator())
        first = "no error"
    except Exception as e:  # noqa: BLE001  (what the task would fail with)
        first = f"{type(e).__name__}: {e}"
    store.abort()
    try:
        p.get_store(version, now_ms=1_000 + version)
        retry_down = "no error"
    except OSError as e:
        retry_down = f"{type(e).__name__}: {e}"
    service.failing = None
    served_before = service.bytes
    exact = dict(p.get_store(version, now_ms=1_000 + version).iterator()) == expected(version)
    whole = sum(os.path.getsize(os.path.join(checkpoint_dir, n)) for n in set(
        os.path.basename(uri) for uri in placeholders(p).values()))
    read_whole = service.bytes - served_before >= whole > 0
    repaired = p.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name]
    p.close()
    service.stop()
    return first, retry_down, exact, read_whole, repaired




def test_a_provider_restores_in_place_the_snapshot_it_wrote_itself(make_ranges_provider) -> None:  # noqa: ANN001
    """Its own SST files are not in the listing its loads cached (uploads leave it alone): a
    restore of its own snapshot lists afresh instead of taking them for missing."""
    ck = Checkpoint(make_ranges_provider, ids=False)
    p = ck.make(snapshot_interval=1)
    assert ck.state(p, VERSIONS) == expected(VERSIONS)
    ck.commit(p, VERSIONS)  # a snapshot of VERSIONS + 1, with the version's own new SST file
    p._db.drop()  # noqa: SLF001  (as a failed load drops it)
    p.drain_metrics()
    assert ck.state(p, VERSIONS + 1) == expected(VERSIONS + 1)  # from the snapshot it wrote
    metrics = p.drain_metrics()
    assert metrics[M.SST_FILES_READ_IN_PLACE.name] > 0 and metrics[M.SNAPSHOTS_AUTO_REPAIRED.name] == 0
