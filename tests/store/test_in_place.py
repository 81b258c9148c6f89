"""SST snapshots restored in place (`snapshot.readInPlace`, store/in_place.py): the local DB
reads the checkpoint's SST files where they lie, never changes or removes them, names them in
its next snapshot without uploading them again, and a damaged one is repaired as a copying
restore repairs it (the copying restore's tests: test_checkpoint_damage.py)."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import subprocess
import sys
import zlib
from collections.abc import Callable

import pytest
from tests.damage import BREAKING
from tests.range_service import served_provider
from tests.store.test_checkpoint_damage import VERSIONS, Checkpoint, check_repair, expected, only_in, writes

from ttlstate.checkpoint.errors import CheckpointError
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.checkpoint.record_file import verify_record_file
from ttlstate.checkpoint.sst_manifest import is_sst_file, read_manifest
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store import metric_names as M
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock


def sst_files(directory: str) -> dict[str, tuple[int, int, int]]:
    """Each uploaded SST file: (inode, size, CRC32), what would change if anything touched it."""
    out = {}
    for n in os.listdir(directory):
        if is_sst_file(n):
            path = os.path.join(directory, n)
            with open(path, "rb") as f:
                out[n] = (os.stat(path).st_ino, os.path.getsize(path), zlib.crc32(f.read()))
    return out


def named_by_snapshots(directory: str) -> set[str]:
    names: set[str] = set()
    for n in os.listdir(directory):
        if n.endswith(".snapshot"):
            path = os.path.join(directory, n)
            names |= read_manifest(path, verify_record_file(path, b"S")).names
    return names


def wait_for_checks(p: StoreProvider) -> None:
    for check in p.sst._checks:  # noqa: SLF001  (the background checks a test waits out)
        check.wait()


def test_a_restore_reads_the_checkpoints_files_and_never_changes_them(
        make_in_place_provider: Callable[..., StoreProvider]) -> None:
    ck = Checkpoint(make_in_place_provider, ids=False)
    before = sst_files(ck.directory)
    fresh = ck.make(snapshot_interval=2)
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    links = {n: os.readlink(os.path.join(fresh.db_dir, n))
             for n in os.listdir(fresh.db_dir) if n.endswith(".sst")}
    assert links and all(os.path.dirname(t) == ck.directory and is_sst_file(os.path.basename(t))
                         for t in links.values()), links  # every SST file: the checkpoint's
    assert fresh.drain_metrics()[M.SST_FILES_READ_IN_PLACE.name] == len(links)
    wait_for_checks(fresh)
    assert not fresh.sst.damaged

    commit_on_top_changing_nothing(ck, fresh, before)
    fresh.close()
    assert ck.state(ck.make(snapshot_interval=2), VERSIONS + 6) == expected(VERSIONS + 6)


def commit_on_top_changing_nothing(ck: Checkpoint, fresh: StoreProvider,
                                   before: dict[str, tuple[int, int, int]]) -> None:
    """Versions on top of a restore in place: writes, removes and a full compaction (which makes
    the restored files obsolete in the local DB), snapshots and the checkpoint's clean-up; the
    checkpoint's files as they were (`before`: sst_files) but those no snapshot names any more."""
    for v in range(VERSIONS, VERSIONS + 6):
        ck.commit(fresh, v)
        if v == VERSIONS + 2:
            fresh.engine.compact()
        fresh.do_cleanup_maintenance(2)
    assert ck.state(fresh, VERSIONS + 6) == expected(VERSIONS + 6)
    after = sst_files(ck.directory)
    for name, seen in before.items():  # never modified; deleted only once no snapshot names it
        if name in after:
            assert after[name] == seen, name
        else:
            assert name not in named_by_snapshots(ck.directory), name
    assert named_by_snapshots(ck.directory) <= set(after)


def two_file_snapshot(ck: Checkpoint) -> int:
    """Writes a snapshot of two files (one fully compacted, one flush) to restore from; returns
    its version. With the next version's flush that is three level-0 files at most, below
    RocksDB's trigger (four) of a background compaction, which would otherwise race the next
    snapshot and make the restored files obsolete before it reads them."""
    compacted = ck.make(snapshot_interval=1)
    assert ck.state(compacted, VERSIONS) == expected(VERSIONS)
    compacted.engine.compact()
    ck.commit(compacted, VERSIONS)
    compacted.close()
    return VERSIONS + 1


def test_the_next_snapshot_names_the_files_read_in_place_without_uploading_them(
        make_in_place_provider: Callable[..., StoreProvider]) -> None:
    ck = Checkpoint(make_in_place_provider, ids=False)
    newest = os.path.join(ck.directory, ck.name(two_file_snapshot(ck), "snapshot"))
    restored_from = read_manifest(newest, verify_record_file(newest, b"S")).names
    assert len(restored_from) <= 2, restored_from
    fresh = ck.make(snapshot_interval=1)
    assert ck.state(fresh, VERSIONS + 1) == expected(VERSIONS + 1)
    before = sst_files(ck.directory)
    ck.commit(fresh, VERSIONS + 1)  # version VERSIONS + 2: a snapshot
    snapshot = os.path.join(ck.directory, ck.name(VERSIONS + 2, "snapshot"))
    names = read_manifest(snapshot, verify_record_file(snapshot, b"S")).names
    assert restored_from <= names  # still read by the local DB: named again, as they are
    after = sst_files(ck.directory)
    assert all(after[n] == before[n] for n in restored_from)  # not uploaded again
    new = set(after) - set(before)
    assert new == names - restored_from and len(new) == 1, new  # only the version's own flush


@pytest.mark.parametrize("maker", ["make_in_place_provider", "make_ranges_provider"],
                         ids=["linked", "ranges"])
@pytest.mark.parametrize("how", BREAKING)
def test_a_damaged_file_found_at_the_restore_is_repaired_at_once(  # noqa: ANN001
        request, maker: str, how: str, caplog: pytest.LogCaptureFixture) -> None:
    """Missing or truncated: its size tells at once (through a range service, the load's
    listing and the read of its footer). Other bytes in its index, filter or meta blocks (these
    small files' middle): RocksDB checks them when it opens the file."""
    ck = Checkpoint(request.getfixturevalue(maker), ids=False)
    check_repair(ck, only_in(ck, ck.name(ck.newest_snapshot(), "snapshot")), how, caplog)


_READ_TWICE = """
import json, logging, logging.handlers, sys
from tests.store.test_in_place import read_twice
print(json.dumps(read_twice(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "ranges")))
"""


def read_twice(checkpoint_dir: str, local_dir: str, version: int, ranges: bool) -> tuple[str, bool, str, int]:
    """A fresh executor's task reading every key of `version` (`ranges`: through a range
    service), and its retry, which then commits the next version and snapshots it; (the first's
    error, whether the retry read the version exactly, what was logged, snapshots repaired)."""
    handler = logging.handlers.BufferingHandler(10_000)
    logging.getLogger("ttlstate").addHandler(handler)
    logging.getLogger("ttlstate").setLevel(logging.INFO)
    service = None
    if ranges:
        service, p = served_provider(checkpoint_dir, local_dir)
    else:
        cfg = StoreConfig(TtlConfig(), EngineKind.NATIVE, 2, snapshot_read_in_place=True)
        location = LocalCheckpointLocation(checkpoint_dir)
        p = StoreProvider("op0/p0", local_dir, location, cfg, ManualClock(1000))
    try:
        dict(p.get_store(version, now_ms=1_000 + version).iterator())
        first = "no error"
    except Exception as e:  # noqa: BLE001  (what the task would fail with)
        first = f"{type(e).__name__}: {e}"
    store = p.get_store(version, now_ms=1_000 + version)
    exact = dict(store.iterator()) == expected(version)
    for k, val in writes(version).items():
        store.put(k, val) if val is not None else store.remove(k)
    store.commit()
    p.write_snapshot()
    repaired = p.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name]
    p.close()
    if service is not None:
        service.stop()
    return first, exact, "\n".join(r.getMessage() for r in handler.buffer), repaired


@pytest.mark.parametrize("way", ["linked", "ranges"])
@pytest.mark.parametrize("by", ["task", "load"])
def test_a_damaged_block_read_later_is_repaired(make_in_place_provider: Callable[..., StoreProvider],
                                                by: str, way: str, tmp_path) -> None:  # noqa: ANN001
    """Other bytes in a data block, which RocksDB reads only when a key in it is. `load`: the
    load's replay of a changelog reads it (to count keys) and passes over the snapshot at once.
    `task`: the snapshot's own version is loaded (no replay); the task reading every key fails
    naming the file, and its retry waits for the background check that finds it (`linked`), or
    reads the files whole first (`ranges`: through a range service), and repairs.
    Run in a process of its own: the writer's blocks are in this one's block cache, which
    RocksDB keys by the file's identity, not its path."""
    ck = Checkpoint(make_in_place_provider, ids=False)
    version = ck.newest_snapshot() if by == "task" else VERSIONS
    victim = only_in(ck, ck.name(ck.newest_snapshot(), "snapshot"))
    path = os.path.join(ck.directory, victim)
    with open(path, "r+b") as f:  # the first data block starts the file
        f.seek(8)
        byte = f.read(1)
        f.seek(8)
        f.write(bytes([byte[0] ^ 0x01]))
    # The check stalls a second first, as a large state's would: the retry must wait for it.
    env = {**os.environ, "TTLSTATE_FAULTS": f"in-place-check+idle=1000:{tmp_path / 'stalled'}"}
    args = [ck.directory, str(tmp_path / "fresh"), str(version), way]
    run = subprocess.run([sys.executable, "-c", _READ_TWICE, *args], capture_output=True, text=True,
                         timeout=120, check=False, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert run.returncode == 0, run.stderr
    first, exact, logged, repaired = json.loads(run.stdout.splitlines()[-1])
    assert exact and repaired == 1, (first, logged)
    assert path in logged and "passing it over" in logged, logged
    if by == "task":
        assert "Corruption" in first and victim.split("-")[-1] in first, first  # its local name
    else:
        assert first == "no error"
    snapshot = os.path.join(ck.directory, ck.name(version + 1, "snapshot"))
    assert victim not in read_manifest(snapshot, verify_record_file(snapshot, b"S")).names
    fresh = ck.make(snapshot_interval=2)
    assert dict(fresh.get_store(version + 1, now_ms=1).iterator()) == expected(version + 1)


def test_no_snapshot_names_a_file_found_damaged(make_in_place_provider: Callable[..., StoreProvider]) -> None:
    ck = Checkpoint(make_in_place_provider, ids=False)
    version = two_file_snapshot(ck)  # no background compaction to rewrite the restored files
    victim = only_in(ck, ck.name(version, "snapshot"))
    fresh = ck.make(snapshot_interval=2)
    ck.state(fresh, version)
    wait_for_checks(fresh)
    s = fresh.get_store(version, now_ms=1_000 + version)
    s.put(b"k", b"v")
    s.commit()
    # Found damaged since (as the background check records it; said directly here): every file
    # the restore linked.
    newest = os.path.join(ck.directory, ck.name(ck.newest_snapshot(), "snapshot"))
    assert victim in read_manifest(newest, verify_record_file(newest, b"S")).names
    for name in read_manifest(newest, verify_record_file(newest, b"S")).names:
        fresh.sst.damaged[name] = "has other bytes (a test says so)"
    with pytest.raises(CheckpointError, match="is not written: the local DB reads SST file"):
        fresh.write_snapshot()
    assert ck.name(version + 1, "snapshot") not in os.listdir(ck.directory)


class ThroughHadoop:
    """A checkpoint the state server reaches through the shim, which offered no range service
    (tests/range_service.py is one that does): any location but a local folder."""

    def __init__(self, directory: str) -> None:
        self._local = LocalCheckpointLocation(directory)

    def __getattr__(self, name: str) -> object:
        return getattr(self._local, name)


def test_a_checkpoint_read_through_hadoop_is_copied_and_says_so(
        tmp_path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    cfg = StoreConfig(TtlConfig(), EngineKind.NATIVE, 2, snapshot_read_in_place=True)

    def make(local: str) -> StoreProvider:
        return StoreProvider("op0/p0", str(tmp_path / local), ThroughHadoop(str(tmp_path / "ck")),  # type: ignore[arg-type]
                             cfg, ManualClock(1000))

    writer = make("w")
    for v in range(4):
        s = writer.get_store(v, now_ms=1000)
        s.put(b"k%d" % v, b"v")
        s.commit()
        writer.do_snapshot_maintenance()
    writer.close()
    fresh = make("r")
    with caplog.at_level(logging.INFO):
        assert len(dict(fresh.get_store(4, now_ms=1000).iterator())) == 4
    assert not any(os.path.islink(os.path.join(fresh.db_dir, n)) for n in os.listdir(fresh.db_dir))
    assert fresh.drain_metrics()[M.SST_FILES_READ_IN_PLACE.name] == 0
    assert "snapshot.readInPlace is on, but the shim offered no range service" in caplog.text
    fresh.close()


def test_a_state_reader_reads_in_place(make_in_place_provider: Callable[..., StoreProvider],
                                       tmp_path) -> None:  # noqa: ANN001
    """The state data source's store: what it reads of a large state is not copied first."""
    ck = Checkpoint(make_in_place_provider, ids=False)
    cfg = StoreConfig(TtlConfig(), EngineKind.NATIVE, 2, snapshot_read_in_place=True)
    reader = StoreProvider("op0/p0", str(tmp_path / "reader"), LocalCheckpointLocation(ck.directory),
                           cfg, ManualClock(1000), reader=True)
    try:
        assert dict(reader.get_store(VERSIONS, read_only=True).iterator()) == expected(VERSIONS)
        assert reader.drain_metrics()[M.SST_FILES_READ_IN_PLACE.name] > 0
    finally:
        reader.close()
