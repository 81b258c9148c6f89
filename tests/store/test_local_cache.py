"""`snapshot.localMaxBytes` (store/local_cache.py): after each snapshot, the uploaded SST files
past the bound leave the local disk and are read from their checkpoint copies, by the readers
RocksDB holds open too; the state reads exactly through every later version, compaction,
clean-up and restore, and the checkpoint's copies are never changed."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import pytest
from tests.store.test_checkpoint_damage import folded
from tests.store.test_in_place import named_by_snapshots, sst_files

from ttlstate.checkpoint.record_file import verify_record_file
from ttlstate.checkpoint.sst_manifest import read_manifest
from ttlstate.config.keys import SNAPSHOT_LOCAL_MAX_BYTES, SNAPSHOT_READ_IN_PLACE
from ttlstate.config.parse import ConfError
from ttlstate.config.store_config import store_config_from_confs
from ttlstate.store import metric_names as M
from ttlstate.store.local_cache import local_sst_bytes
from ttlstate.store.provider import StoreProvider

VERSIONS = 8


def batch(v: int) -> dict[bytes, bytes | None]:
    """Version v + 1's writes: 2000 new keys with incompressible values (an SST file of about
    100 kB each flush), an overwrite and a remove of the version before's."""
    rng = random.Random(v)
    out: dict[bytes, bytes | None] = {b"k%02d-%05d" % (v, i): rng.randbytes(48) for i in range(2000)}
    if v:
        out[b"k%02d-%05d" % (v - 1, 0)] = b"overwritten"
        out[b"k%02d-%05d" % (v - 1, 1)] = None
    return out


def expected(upto: int) -> dict[bytes, bytes]:
    return folded(batch, upto)


def commit(p: StoreProvider, v: int) -> None:
    s = p.get_store(v, now_ms=1000 + v)
    for k, val in batch(v).items():
        if val is None:
            s.remove(k)
        else:
            s.put(k, val)
    assert s.commit() == v + 1
    p.do_snapshot_maintenance()


def local_uploaded(p: StoreProvider) -> set[str]:
    """The uploaded files still on the local disk (a background compaction may have written one
    since the snapshot, which the next snapshot uploads)."""
    return set(local_sst_bytes(p.db_dir)) & set(p.sst.uploaded_files())


def state(p: StoreProvider, v: int) -> dict[bytes, bytes]:
    return dict(p.get_store(v, now_ms=1000 + v).iterator())


@pytest.fixture(params=["make_in_place_provider", "make_ranges_provider"], ids=["linked", "ranges"])
def make(request) -> Callable[..., StoreProvider]:  # noqa: ANN001
    return request.getfixturevalue(request.param)


def test_uploaded_files_leave_the_local_disk_and_read_exactly(make: Callable[..., StoreProvider]) -> None:
    p = make(snapshot_interval=1, local_max_bytes=1)  # every uploaded file goes
    evicted = 0
    for v in range(VERSIONS):
        commit(p, v)
        assert not local_uploaded(p), v  # all uploaded by the snapshot, all evicted
        evicted += p.drain_metrics()[M.LOCAL_SST_FILES_EVICTED.name]
        assert state(p, v + 1) == expected(v + 1)
    assert evicted > 0  # (a background compaction may remove a flush before it is evicted)
    before = sst_files(p.checkpoint.directory)
    # One file of a full compaction, opened by RocksDB as it wrote it, and the next version's
    # flush: both uploaded and evicted by its snapshot (too few files for a background compaction).
    p.engine.compact()
    commit(p, VERSIONS)
    assert not local_uploaded(p) and not local_sst_bytes(p.db_dir)
    p.drain_metrics()
    # A full compaction reads both through the readers RocksDB opened before they were evicted
    # (its table cache): a reader that had not switched would read freed blocks (zeros), which
    # RocksDB's checks would refuse.
    p.engine.compact()
    reads = p.drain_metrics()
    assert reads[M.IN_PLACE_RANGE_READS.name] > 0 and reads[M.IN_PLACE_RANGE_READ_BYTES.name] > 0
    assert state(p, VERSIONS + 1) == expected(VERSIONS + 1)
    commit(p, VERSIONS + 1)  # the compaction's output uploaded, then evicted
    assert not local_uploaded(p)
    assert state(p, VERSIONS + 2) == expected(VERSIONS + 2)
    p.do_cleanup_maintenance(2)
    after = sst_files(p.checkpoint.directory)
    assert all(after[n] == seen for n, seen in before.items() if n in after)  # copies never changed
    assert named_by_snapshots(p.checkpoint.directory) <= set(after)
    p.close()
    fresh = make(snapshot_interval=1)
    assert state(fresh, VERSIONS + 2) == expected(VERSIONS + 2)


def test_the_bound_keeps_the_newest_uploaded_files_local(make: Callable[..., StoreProvider]) -> None:
    bound = 300_000  # about two flushes of `batch`
    p = make(snapshot_interval=1, local_max_bytes=bound)
    evicted_any = False
    for v in range(VERSIONS):
        commit(p, v)
        uploaded = set(p.sst.uploaded_files())
        local = local_sst_bytes(p.db_dir)
        kept = {n: used for n, used in local.items() if n in uploaded}
        assert sum(kept.values()) <= bound, (v, local)
        evicted = [n for n in os.listdir(p.db_dir) if n in uploaded and n not in local
                   and not os.path.islink(os.path.join(p.db_dir, n))]
        assert all(number(e) < number(k) for e in evicted for k in kept), (evicted, kept)  # the oldest go
        evicted_any = evicted_any or bool(evicted)
        assert state(p, v + 1) == expected(v + 1)
    assert evicted_any and p.drain_metrics()[M.LOCAL_SST_BYTES_EVICTED.name] > 0
    # One large file (a full compaction's) and the next version's flush: the snapshot evicts the
    # large older one and keeps the flush (too few files for a background compaction to race).
    p.engine.compact()
    commit(p, VERSIONS)
    assert len(local_sst_bytes(p.db_dir)) == 1
    p.drain_metrics()
    # A full compaction reads both past the block cache: the kept one (and its own output, which
    # RocksDB reads back) locally, the evicted one from its copy, each counted.
    p.engine.compact()
    reads = p.drain_metrics()
    assert reads[M.IN_PLACE_RANGE_READS.name] > 0 and reads[M.IN_PLACE_LOCAL_READS.name] > 0, reads
    assert reads[M.IN_PLACE_RANGE_READ_BYTES.name] > 0 and reads[M.IN_PLACE_LOCAL_READ_BYTES.name] > 0
    assert state(p, VERSIONS + 1) == expected(VERSIONS + 1)


def number(name: str) -> int:
    return int(name.split(".")[0])


def test_the_bound_needs_reading_in_place() -> None:
    with pytest.raises(ConfError) as e:
        store_config_from_confs({SNAPSHOT_LOCAL_MAX_BYTES.key: "1g"})
    assert SNAPSHOT_LOCAL_MAX_BYTES.key in str(e.value) and SNAPSHOT_READ_IN_PLACE.key in str(e.value)
    config = store_config_from_confs({SNAPSHOT_LOCAL_MAX_BYTES.key: "1g", SNAPSHOT_READ_IN_PLACE.key: "true"})
    assert config.snapshot_local_max_bytes == 1 << 30
    assert store_config_from_confs({SNAPSHOT_LOCAL_MAX_BYTES.key: "0"}).snapshot_local_max_bytes == 0


def test_a_failed_eviction_leaves_the_files_local_and_the_snapshot_stands(
        make_in_place_provider: Callable[..., StoreProvider], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from ttlstate.store import snapshots

    def unreachable(*args: object) -> None:
        raise OSError("checkpoint file system unreachable (test)")

    monkeypatch.setattr(snapshots, "bound_local_files", unreachable)
    p = make_in_place_provider(snapshot_interval=1, local_max_bytes=1)
    commit(p, 0)
    assert "1.snapshot" in os.listdir(p.checkpoint.directory)
    assert local_uploaded(p)  # still local
    assert "could not leave the local disk" in caplog.text and "unreachable (test)" in caplog.text
    assert state(p, 1) == expected(1)


def test_a_damaged_copy_of_an_evicted_file_is_passed_over_by_the_retry(
        make: Callable[..., StoreProvider], caplog: pytest.LogCaptureFixture) -> None:
    p = make(snapshot_interval=1, local_max_bytes=1)
    for v in range(3):  # a flush each, all evicted; nothing read, so no data block is cached
        commit(p, v)
    uploaded = p.sst.uploaded_files()
    newest = max(uploaded, key=number)  # version 3's flush: snapshots 1 and 2 do not name it
    assert newest not in local_sst_bytes(p.db_dir)
    copy = os.path.join(p.checkpoint.directory, uploaded[newest].name)
    with open(copy, "r+b") as out:  # its first data blocks, in the copy its reads go to
        out.seek(1000)
        out.write(bytes(4000))
    with pytest.raises(RuntimeError, match="Corruption"):
        state(p, 3)  # the batch that reads the damage fails
    # Its retry: the copy is read whole, found damaged, and the load passes over every snapshot
    # naming it (snapshot 2 and changelog 3 instead).
    assert state(p, 3) == expected(3)
    assert "passes over every snapshot naming it" in caplog.text and newest in caplog.text
    assert uploaded[newest].name in p.sst.damaged
    commit(p, 3)  # and goes on: the next snapshot never names the damaged copy
    path = os.path.join(p.checkpoint.directory, "4.snapshot")
    assert uploaded[newest].name not in read_manifest(path, verify_record_file(path, b"S")).names
    assert state(p, 4) == expected(4)
