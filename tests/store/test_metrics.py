"""Store metrics mean what Spark users read into them: memory is the store's RocksDB memory
(memtables, SST readers, pending writes), not the bytes written this batch; the state's size
counts memtables; one ttlExpiredTotal adds up every way an entry left by TTL; a store with column
families reports its user and internal families' keys apart, exactly, however a version loads."""

from __future__ import annotations

from ttlstate.config.store_config import IncrementalCleanup, TtlConfig
from ttlstate.store import metric_names as M
from ttlstate.store.column_families import family_prefix


def test_memory_and_state_bytes_follow_the_state_not_the_batch(make_provider) -> None:  # noqa: ANN001
    p = make_provider()
    for v in range(3):  # batches small enough for the memtable (larger ones are bulk-loaded)
        s = p.get_store(v, now_ms=1000)
        for i in range(v * 3000, (v + 1) * 3000):
            s.put(b"key-%08d" % i, b"x" * 100)
        s.commit()
    quiet = p.get_store(3, now_ms=1000)  # a batch that writes nothing
    m = quiet.metrics()
    assert m.num_keys == 9_000
    if p.engine.kind == "native":  # rocksdict reports no memtable size through its API
        assert m.memory_bytes >= 9_000 * 100  # everything is still in the memtable
        assert m.custom[M.STATE_BYTES.name] >= 9_000 * 100
    assert m.custom[M.STATE_BYTES.name] >= m.custom[M.ROCKSDB_SST_FILE_SIZE.name]
    quiet.abort()


def test_ttl_expired_total_adds_every_way_out(make_provider) -> None:  # noqa: ANN001
    p = make_provider(TtlConfig(ttl_ms=100, incremental=IncrementalCleanup(size=100)))
    s = p.get_store(0, now_ms=1000)
    for k in (b"a", b"b", b"c"):
        s.put(k, b"v")
    s.commit()
    s = p.get_store(1, now_ms=5000)  # all expired: one read, then two more by incremental cleanup
    assert s.get(b"a") is None
    s.commit()
    m = s.metrics().custom
    assert m[M.TTL_EXPIRED_ON_READ.name] == 1 and m[M.TTL_REMOVED_INCREMENTAL.name] == 2
    assert m[M.TTL_EXPIRED_TOTAL.name] == 3
    assert m[M.NUM_REMOVED_STATE_ROWS.name] == 3  # summed by Spark into numRowsRemoved


def test_a_load_reports_the_changelogs_it_replayed(make_provider) -> None:  # noqa: ANN001
    """Spark's rocksdbNumReplayChangelogFiles: the changelogs a load applied after the newest
    snapshot (on every engine and layout), none when it continues its own local version."""
    p = make_provider(snapshot_interval=1000)
    for v in range(5):
        s = p.get_store(v, now_ms=1000)
        s.put(b"k%d" % v, b"v")
        s.commit()
        if v == 1:
            assert p.write_snapshot() == "2.snapshot"
    assert p.get_store(5, now_ms=1000).metrics().custom[M.REPLAYED_CHANGELOGS.name] == 0
    for version, replayed in ((5, 3), (2, 0), (1, 1)):
        fresh = make_provider(snapshot_interval=1000)
        s = fresh.get_store(version, now_ms=1000)
        assert s.metrics().custom[M.REPLAYED_CHANGELOGS.name] == replayed, version
        assert fresh.num_keys == version
        s.abort()


def test_a_store_with_column_families_counts_internal_keys_through_every_load(make_provider) -> None:  # noqa: ANN001
    """numRowsTotal counts the user families' keys, rocksdbNumInternalColFamiliesKeys the
    internal ones' (`$` names), at each commit and after each kind of load on an empty local
    directory: changelogs only (1, 2), the snapshot alone (3), the snapshot and changelogs whose
    headers record the counts (5); and, as after a load of files written before the count,
    when the store knows no internal count (a scan counts it)."""
    writer = make_provider(snapshot_interval=1000, column_families=True)
    model: dict[bytes, bytes] = {}
    want: dict[int, tuple[int, int]] = {}
    for v in range(5):
        s = writer.get_store(v, now_ms=1000)
        for i in range(6):
            for family in ("count", "$timers_count", "$ttl_count"):
                key = family_prefix(family) + bytes([i, v % 2])
                if (i + v) % 3 == 0 and v:
                    s.remove(key)
                    model.pop(key, None)
                else:
                    s.put(key, b"x")
                    model[key] = b"x"
        s.commit()
        internal = sum(1 for k in model if k[2:3] == b"$")
        want[v + 1] = (len(model) - internal, internal)
        got = s.metrics()
        assert (got.num_keys, got.custom[M.INTERNAL_FAMILY_KEYS.name]) == want[v + 1], v + 1
        if v == 2:
            assert writer.write_snapshot() == "3.snapshot"
    assert all(0 < internal < user + internal for user, internal in want.values())
    for version in (1, 2, 3, 5):
        fresh = make_provider(snapshot_interval=1000, column_families=True)
        s = fresh.get_store(version, now_ms=1000)
        got = s.metrics()
        assert (got.num_keys, got.custom[M.INTERNAL_FAMILY_KEYS.name]) == want[version], version
        s.abort()
        fresh._db.num_internal_keys = None  # as a load of files from before the count leaves it
        got = fresh.get_store(version, now_ms=1000).metrics()
        assert (got.num_keys, got.custom[M.INTERNAL_FAMILY_KEYS.name]) == want[version], version
    plain = make_provider(snapshot_interval=1000).get_store(5, now_ms=1000).metrics()
    assert (plain.num_keys, plain.custom[M.INTERNAL_FAMILY_KEYS.name]) == (len(model), 0)  # no families
