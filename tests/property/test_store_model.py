"""The store against a plain-dict model of Flink's TTL rules, under every configuration.

The model is written from the spec (Flink's AbstractTtlDecorator / TtlUtils, Spark's store
contract), not from the implementation:
- put stores (now, value); a point read of an expired entry deletes it and returns it only
  under ReturnExpiredIfNotCleanedUp; a point read of a live entry refreshes it under
  OnReadAndWrite; iteration hides and deletes expired entries and never refreshes.
- Cleanup (incremental, full snapshot, compaction filter) only removes entries that are
  expired at the batch time, so under ReturnExpiredIfNotCleanedUp an expired entry may be
  returned or already gone; a live entry is never missing and never different.
- append (a column family's ListState merge) is a read of the key, then a put of what it read
  (absent: empty) followed by the appended bytes.
- Versions: commit gives v+1, abort leaves no trace, any retained version reloads exactly,
  into the same provider or a new one on an empty local directory; re-committing a version
  supersedes later ones. A store with column families logs every write in order (its
  changelogs hold appends): its versions reload exactly too.
- A store with column families (keys behind a family name, internal families' names start
  with `$`) reports its user families' keys as numRowsTotal and its internal families' keys as
  `rocksdbNumInternalColFamiliesKeys`, exactly, at every commit and every load, also when the
  files it loaded recorded no internal count (older files: the store counts them).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind, SnapshotLayout, StateVisibility, UpdateType
from ttlstate.config.store_config import IncrementalCleanup, StoreConfig, TtlConfig
from ttlstate.store import metric_names as M
from ttlstate.store.column_families import family_prefix, is_internal_key
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

TTL = 100
RETAIN = 3
RAW_KEYS = st.binary(min_size=1, max_size=3).map(lambda b: bytes(c % 3 * 0x7f for c in b))  # 0x00 0x7f 0xfe
# Keys of column families, user and internal ones (`$`), as a transformWithState store has them.
FAMILY_KEYS = st.tuples(st.sampled_from(["v", "$timers_v", "$ttl_v"]), RAW_KEYS).map(
    lambda t: family_prefix(t[0]) + t[1])
KEYS = st.one_of(RAW_KEYS, FAMILY_KEYS)
PREFIXES = st.binary(max_size=2).map(lambda b: bytes(c % 3 * 0x7f for c in b))
VALUES = st.binary(max_size=4)
ABSENT = object()


def expired(ts: int, now: int) -> bool:
    """Flink's rule, the model's own copy: ts + ttl <= now (no overflow at these magnitudes)."""
    return ts + TTL <= now


class Expired:
    def __init__(self, value: bytes) -> None:
        self.value = value


class StoreModel(RuleBasedStateMachine):
    config: StoreConfig  # set per generated subclass
    column_families = False

    def __init__(self) -> None:
        super().__init__()
        self.root = tempfile.mkdtemp(prefix="ttlstate-model-")
        self.ck = LocalCheckpointLocation(f"{self.root}/ck")
        self.dirs = itertools.count()
        self.clock = 1000
        self.versions: dict[int, dict[bytes, tuple[int, bytes]]] = {0: {}}
        self.loadable = {0}
        self.provider = self._new_provider()
        self._open(0)

    def teardown(self) -> None:
        self.provider.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------
    @property
    def ttl_on(self) -> bool:
        return self.config.ttl.enabled

    def _new_provider(self) -> StoreProvider:
        return StoreProvider("model", f"{self.root}/local{next(self.dirs)}", self.ck, self.config,
                             ManualClock(self.clock), column_families=self.column_families)

    def _open(self, version: int) -> None:
        self.store = self.provider.get_store(version, now_ms=self.clock)
        self.now = self.clock
        self.base = version
        self.work = dict(self.versions[version])
        self._check_key_counts()

    def _check_key_counts(self) -> None:
        """A store with column families, TTL off as on a served store: counts are exact (with
        ttlstate's TTL the model keeps expired entries the store may have removed)."""
        if not self.column_families or self.ttl_on:
            return
        metrics = self.store.metrics()
        internal = sum(1 for k in self.work if is_internal_key(k))
        assert (metrics.num_keys, metrics.custom[M.INTERNAL_FAMILY_KEYS.name]) == (len(self.work) - internal,
                                                                                  internal)

    def _read(self, key: bytes, refresh: bool = True) -> object:
        if key not in self.work:
            return ABSENT
        ts, value = self.work[key]
        if self.ttl_on and expired(ts, self.now):
            del self.work[key]
            return Expired(value)
        if self.ttl_on and refresh and self.config.ttl.update_on_read:
            self.work[key] = (self.now, value)
        return value

    def _check(self, expected: object, got: bytes | None) -> None:
        if expected is ABSENT:
            assert got is None
        elif isinstance(expected, Expired):
            if self.config.ttl.return_expired:
                assert got in (expected.value, None)  # returned once, or already cleaned up
            else:
                assert got is None
        else:
            assert got == expected

    def _check_scan(self, got: list[tuple[bytes, bytes]], prefix: bytes | None) -> None:
        keys = sorted(k for k in self.work if prefix is None or k.startswith(prefix))
        stale = {k: self.work[k][1] for k in keys if self.ttl_on and expired(self.work[k][0], self.now)}
        live = [(k, self.work[k][1]) for k in keys if k not in stale]
        assert [k for k, _ in got] == sorted(k for k, _ in got)
        if self.config.ttl.return_expired:
            assert [kv for kv in got if kv[0] not in stale] == live
            assert all(stale[k] == v for k, v in got if k in stale)
        else:
            assert got == live
        for k in stale:  # iteration deletes what it finds expired
            del self.work[k]

    # -- rules ----------------------------------------------------------------------------
    @rule(key=KEYS, value=VALUES)
    def put(self, key: bytes, value: bytes) -> None:
        self.store.put(key, value)
        self.work[key] = (self.now, value)

    @rule(key=KEYS, more=VALUES)
    def append(self, key: bytes, more: bytes) -> None:
        expected = self._read(key)
        self.store.append(key, more)
        if isinstance(expected, Expired) and self.config.ttl.return_expired:
            got = self.store.get(key)  # appended to the expired value, or to nothing if cleaned up
            assert got in (expected.value + more, more)
            value = got
        else:
            value = (expected if isinstance(expected, bytes) else b"") + more
        self.work[key] = (self.now, value)

    @rule(key=KEYS)
    def remove(self, key: bytes) -> None:
        self.store.remove(key)
        self.work.pop(key, None)

    @rule(key=KEYS)
    def get(self, key: bytes) -> None:
        self._check(self._read(key), self.store.get(key))

    @rule(key=KEYS)
    def key_exists(self, key: bytes) -> None:
        expected = self._read(key)
        got = self.store.key_exists(key)
        if expected is ABSENT:
            assert not got
        elif isinstance(expected, Expired):
            assert got in ((True, False) if self.config.ttl.return_expired else (False,))
        else:
            assert got

    @rule(keys=st.lists(KEYS, max_size=6))  # a key asked twice reads what its first read did
    def multi_get(self, keys: list[bytes]) -> None:
        got = self.store.multi_get(keys)
        for key, value in zip(keys, got, strict=True):
            self._check(self._read(key), value)

    @rule(remove_while_iterating=st.booleans())
    def iterate(self, remove_while_iterating: bool) -> None:
        got = []
        for i, (k, v) in enumerate(self.store.iterator()):
            got.append((k, v))
            if remove_while_iterating and i % 2 == 0:
                self.store.remove(k)  # Spark's eviction removes while iterating
        self._check_scan(got, None)
        if remove_while_iterating:
            for k, _ in got[::2]:
                self.work.pop(k, None)

    @rule(prefix=PREFIXES)
    def prefix_scan(self, prefix: bytes) -> None:
        self._check_scan(list(self.store.prefix_scan(prefix)), prefix)

    @rule()
    def commit(self) -> None:
        new = self.store.commit()
        assert new == self.base + 1
        self.versions = {v: s for v, s in self.versions.items() if v <= self.base}
        self.versions[new] = dict(self.work)
        self.loadable = {v for v in self.loadable if v <= self.base} | {new}
        metrics = self.store.metrics()
        live = sum(1 for ts, _ in self.work.values() if not (self.ttl_on and expired(ts, self.now)))
        assert live <= metrics.num_keys <= len(self.work) or self.column_families
        self._check_key_counts()
        self._open(new)

    @rule()
    def abort(self) -> None:
        self.store.abort()
        self.store.abort()  # idempotent
        self._open(self.base)

    @rule(dt=st.sampled_from([0, 1, TTL - 1, TTL, TTL + 1, 3 * TTL]))
    def advance_clock(self, dt: int) -> None:
        self.clock += dt  # seen by the next get_store, as a new batch's timestamp

    @rule(data=st.data())
    def reload(self, data: st.DataObject) -> None:
        self.store.abort()
        self._open(data.draw(st.sampled_from(sorted(self.loadable))))

    @rule(data=st.data())
    def restore_into_empty_local_dir(self, data: st.DataObject) -> None:
        self.store.abort()
        self.provider.close()
        self.provider = self._new_provider()
        self._open(data.draw(st.sampled_from(sorted(self.loadable))))

    @rule(data=st.data())
    def read_only_view(self, data: st.DataObject) -> None:
        self.store.abort()
        version = data.draw(st.sampled_from(sorted(self.loadable)))
        ro = self.provider.get_store(version, now_ms=self.clock, read_only=True)
        state = self.versions[version]
        got = list(ro.iterator())
        live = sorted((k, v) for k, (ts, v) in state.items() if not (self.ttl_on and expired(ts, self.clock)))
        if self.config.ttl.return_expired:
            assert set(live) <= set(got) <= {(k, v) for k, (_ts, v) in state.items()}
        else:
            assert got == live
        ro.release()
        ro.release()
        self._open(self.base)

    @precondition(lambda self: self.column_families)
    @rule()
    def load_from_files_without_internal_count(self) -> None:
        """As a load from files written before the count: the store knows no internal count."""
        self.store.abort()
        self.provider._db.num_internal_keys = None
        self._open(self.base)

    @precondition(lambda self: len(self.versions) > 1)
    @rule()
    def maintenance(self) -> None:
        self.provider.do_snapshot_maintenance()
        self.provider.do_cleanup_maintenance(RETAIN)
        latest = max(self.versions)
        self.loadable = {v for v in self.loadable if v >= latest - RETAIN + 1} | {0}

    @invariant()
    def staging_is_clean(self) -> None:
        assert os.listdir(self.provider.files.staging) == []  # no file left behind by commit or load


def _configs() -> list[tuple[str, StoreConfig]]:
    out = []
    engines = [EngineKind.NATIVE, EngineKind.ROCKSDICT]
    for engine in engines:
        out.append((f"{engine.value}-ttl-off", StoreConfig(TtlConfig(), engine, snapshot_interval=2)))
        incremental = [("no-inc", None), ("inc-commit", IncrementalCleanup(2)),
                       ("inc-record", IncrementalCleanup(1, True))]
        for update, vis, (inc_name, inc), full in itertools.product(
                UpdateType, StateVisibility, incremental, [True, False]):
            ttl = TtlConfig(ttl_ms=TTL, update_type=update, visibility=vis, full_snapshot=full,
                            incremental=inc)
            name = f"{engine.value}-{update.value}-{vis.value}-{inc_name}-{'full' if full else 'nofull'}"
            out.append((name, StoreConfig(ttl, engine, snapshot_interval=2)))
    # The native engine's record snapshots (`snapshot.layout=records`; SST files by default).
    out.append(("native-records-ttl-off", StoreConfig(TtlConfig(), EngineKind.NATIVE, 2,
                                                      SnapshotLayout.RECORDS)))
    out.append(("native-records-ttl-full", StoreConfig(
        TtlConfig(ttl_ms=TTL, full_snapshot=True, incremental=IncrementalCleanup(2)), EngineKind.NATIVE, 2,
        SnapshotLayout.RECORDS)))
    return out


CONFIGS = _configs()
# Stores with column families (transformWithState's: changelogs of every write in order, with
# appends): without TTL (each layout), as Spark's TTL leaves them, and with ttlstate's (appends
# then logged as puts where a replay could find another value).
_READ_EXPIRED = TtlConfig(ttl_ms=TTL, update_type=UpdateType.ON_READ_AND_WRITE,
                          visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP,
                          incremental=IncrementalCleanup(1, True))
FAMILY_CONFIGS = [(f"{name}-families", config) for name, config in CONFIGS if name.endswith("ttl-off")]
FAMILY_CONFIGS += [(f"{e.value}-families-ttl-read-expired",
                    StoreConfig(_READ_EXPIRED, e, snapshot_interval=2))
                   for e in (EngineKind.NATIVE, EngineKind.ROCKSDICT)]


@pytest.mark.parametrize(("name", "config"), CONFIGS, ids=[n for n, _ in CONFIGS])
def test_store_matches_model(name: str, config: StoreConfig) -> None:
    machine = type(f"Model_{name}", (StoreModel,), {"config": config})
    machine.TestCase.settings = settings(max_examples=12, stateful_step_count=30, deadline=None)
    machine.TestCase().runTest()


@pytest.mark.parametrize(("name", "config"), FAMILY_CONFIGS, ids=[n for n, _ in FAMILY_CONFIGS])
def test_store_with_column_families_matches_model(name: str, config: StoreConfig) -> None:
    machine = type(f"FamilyModel_{name}", (StoreModel,), {"config": config, "column_families": True})
    machine.TestCase.settings = settings(max_examples=12, stateful_step_count=30, deadline=None)
    machine.TestCase().runTest()
