"""Damaged checkpoint files: a snapshot (record file, SST manifest, or an SST file it names) that
is damaged or missing is passed over and the version rebuilt exactly from an older snapshot and
the changelogs since (repair.py); a damaged file nothing older replaces fails the load naming it.
Every layout x checkpoint format x damage x file kind, as a user meets them: seven committed
versions with snapshotInterval 2, one file of the newest ones damaged, a fresh executor loads
the newest version, commits the next and snapshots it."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable

import pytest
from tests.damage import BREAKING, damage

from ttlstate.checkpoint.errors import CheckpointError, VersionNotFound
from ttlstate.checkpoint.record_file import verify_record_file
from ttlstate.checkpoint.sst_manifest import read_manifest
from ttlstate.store import metric_names as M
from ttlstate.store.provider import StoreProvider

VERSIONS = 7


def writes(v: int) -> dict[bytes, bytes | None]:
    """Version v + 1's batch: new keys, overwrites and removes, so each changelog matters."""
    out: dict[bytes, bytes | None] = {b"k%03d" % (v * 10 + i): b"v%d-%d" % (v, i) for i in range(10)}
    if v > 0:
        out[b"k%03d" % ((v - 1) * 10)] = b"overwritten in %d" % v
        out[b"k%03d" % ((v - 1) * 10 + 1)] = None
    return out


def expected(upto: int) -> dict[bytes, bytes]:
    return folded(writes, upto)


def folded(batch: Callable[[int], dict[bytes, bytes | None]], upto: int) -> dict[bytes, bytes]:
    """The state after versions 1..upto, version v + 1 writing `batch(v)` (None: a remove)."""
    state: dict[bytes, bytes] = {}
    for v in range(upto):
        for k, val in batch(v).items():
            if val is None:
                state.pop(k, None)
            else:
                state[k] = val
    return state


class Checkpoint:
    """A store's checkpoint written as a query writes it, on format 1 or 2."""

    def __init__(self, make: Callable[..., StoreProvider], ids: bool) -> None:
        self.make, self.ids_on = make, ids
        self.ids: list[str | None] = [None]
        writer = make(snapshot_interval=2, checkpoint_ids=ids)
        for v in range(VERSIONS):
            self.commit(writer, v)
        self.directory = writer.checkpoint.directory
        writer.close()

    def commit(self, p: StoreProvider, v: int) -> None:
        s = p.get_store(v, now_ms=1_000 + v, ckpt_id=self.ids[v])
        for k, val in writes(v).items():
            if val is None:
                s.remove(k)
            else:
                s.put(k, val)
        assert s.commit() == v + 1
        self.ids.append(p.last_commit_ids[0] if self.ids_on else None)
        p.do_snapshot_maintenance()

    def name(self, version: int, kind: str) -> str:
        i = self.ids[version] if self.ids_on else None
        return f"{version}_{i}.{kind}" if i else f"{version}.{kind}"

    def newest_snapshot(self) -> int:
        return max(int(n.split(".")[0].split("_")[0]) for n in os.listdir(self.directory)
                   if n.endswith(".snapshot"))

    def state(self, p: StoreProvider, version: int) -> dict[bytes, bytes]:
        return dict(p.get_store(version, now_ms=1_000 + version, ckpt_id=self.ids[version]).iterator())


def only_in(ck: Checkpoint, snapshot: str) -> str:
    """An SST file `snapshot` names and no older snapshot does."""
    def named(name: str) -> set[str]:
        path = os.path.join(ck.directory, name)
        return set(read_manifest(path, verify_record_file(path, b"S")).names)
    older = set().union(*(named(n) for n in os.listdir(ck.directory)
                          if n.endswith(".snapshot") and n != snapshot))
    return sorted(named(snapshot) - older)[0]


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
@pytest.mark.parametrize("how", BREAKING)
def test_a_damaged_snapshot_is_repaired_exactly(make_provider, ids: bool, how: str,  # noqa: ANN001
                                                caplog: pytest.LogCaptureFixture) -> None:
    """The newest snapshot: a record file, or an SST manifest (the layouts of make_provider)."""
    ck = Checkpoint(make_provider, ids)
    check_repair(ck, ck.name(ck.newest_snapshot(), "snapshot"), how, caplog)


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
@pytest.mark.parametrize("how", BREAKING)
def test_a_damaged_sst_file_is_repaired_exactly(make_sst_provider, ids: bool, how: str,  # noqa: ANN001
                                                caplog: pytest.LogCaptureFixture) -> None:
    """An SST file only the newest snapshot names: checked whole (size and CRC32 recorded when
    it was uploaded) before RocksDB opens it."""
    ck = Checkpoint(make_sst_provider, ids)
    check_repair(ck, only_in(ck, ck.name(ck.newest_snapshot(), "snapshot")), how, caplog)


def check_repair(ck: Checkpoint, victim: str, how: str, caplog: pytest.LogCaptureFixture) -> None:
    ids = ck.ids_on
    damage(os.path.join(ck.directory, victim), how)
    kept = os.path.join(ck.directory, victim)
    evidence = open(kept, "rb").read() if os.path.exists(kept) else None

    fresh = ck.make(snapshot_interval=2, checkpoint_ids=ids)
    with caplog.at_level(logging.WARNING):
        assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    if how == "delete" and not ids and victim.endswith(".snapshot"):
        # Format 1 finds snapshots by listing: a deleted one is not there to repair (nor is it
        # for Spark), the load simply starts from the newest one listed.
        assert fresh.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 0
    else:
        assert fresh.checkpoint.describe(victim) in caplog.text and "passing it over" in caplog.text
        assert fresh.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 1

    # The next version commits on the repaired one, and its snapshot replaces the damaged one as
    # the newest base, under its own name: the damaged file stays as it was, for inspection.
    ck.commit(fresh, VERSIONS)
    assert ck.name(VERSIONS + 1, "snapshot") in os.listdir(ck.directory)
    assert (open(kept, "rb").read() if os.path.exists(kept) else None) == evidence
    again = ck.make(snapshot_interval=2, checkpoint_ids=ids)
    assert ck.state(again, VERSIONS + 1) == expected(VERSIONS + 1)
    assert again.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 0  # no repair needed any more


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
@pytest.mark.parametrize("how", BREAKING)
def test_a_damaged_newest_changelog_fails_naming_it(make_provider, ids: bool, how: str) -> None:  # noqa: ANN001
    """Nothing older holds what the newest changelog wrote: the load fails, naming the file."""
    ck = Checkpoint(make_provider, ids)
    victim = ck.name(VERSIONS, "changelog")
    damage(os.path.join(ck.directory, victim), how)
    fresh = ck.make(snapshot_interval=2, checkpoint_ids=ids)
    with pytest.raises(CheckpointError) as e:
        ck.state(fresh, VERSIONS)
    assert fresh.checkpoint.describe(victim) in str(e.value), str(e.value)
    assert f"cannot load version {VERSIONS}" in str(e.value)
    reason = {"delete": "is missing|does not exist", "truncate": "truncated"}.get(how, "corrupt|truncated")
    assert re.search(reason, str(e.value)), str(e.value)
    with pytest.raises(Exception, match="no version is loaded"):
        fresh.engine  # noqa: B018  (nothing half-loaded is left serving)
    assert ck.state(fresh, VERSIONS - 1) == expected(VERSIONS - 1)  # the versions below still load


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
def test_a_changelog_a_snapshot_covers_is_not_needed(make_provider, ids: bool) -> None:  # noqa: ANN001
    """A damaged changelog below the newest snapshot loses nothing the newest versions need."""
    ck = Checkpoint(make_provider, ids)
    newest = ck.newest_snapshot()
    damage(os.path.join(ck.directory, ck.name(newest - 1, "changelog")), "flip")
    assert ck.state(ck.make(checkpoint_ids=ids), VERSIONS) == expected(VERSIONS)


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
def test_a_damaged_changelog_of_a_snapshots_own_version_is_passed_by(  # noqa: ANN001
        make_provider, ids: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Loading exactly a snapshot's version needs only the snapshot, as Spark reads it; its
    changelog only checks the snapshot against another attempt's, which it cannot then."""
    ck = Checkpoint(make_provider, ids)
    newest = ck.newest_snapshot()
    victim = ck.name(newest, "changelog")
    damage(os.path.join(ck.directory, victim), "truncate")
    fresh = ck.make(checkpoint_ids=ids)
    with caplog.at_level(logging.WARNING):
        assert ck.state(fresh, newest) == expected(newest)
    assert fresh.checkpoint.describe(victim) in caplog.text or ids  # format 2 never reads it here


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
def test_no_older_base_left_names_both_files(make_provider, ids: bool) -> None:  # noqa: ANN001
    """The snapshot is damaged and retention (here: a person) removed a changelog below it: the
    error names the damaged snapshot and what stops the repair."""
    ck = Checkpoint(make_provider, ids)
    newest = ck.newest_snapshot()
    snapshot = ck.name(newest, "snapshot")
    damage(os.path.join(ck.directory, snapshot), "flip")
    for v in range(1, newest + 1):  # no older snapshot and no changelog can rebuild it
        for kind in ("changelog", "snapshot"):
            if v != newest and os.path.exists(os.path.join(ck.directory, ck.name(v, kind))):
                os.unlink(os.path.join(ck.directory, ck.name(v, kind)))
    fresh = ck.make(checkpoint_ids=ids)
    with pytest.raises(CheckpointError) as e:
        ck.state(fresh, VERSIONS)
    msg = str(e.value)
    assert fresh.checkpoint.describe(snapshot) in msg and "corrupt" in msg, msg
    assert "no older snapshot rebuilds version" in msg and "is missing" in msg, msg


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
def test_the_replay_bound_stops_a_repair_and_says_so(make_provider, ids: bool) -> None:  # noqa: ANN001
    from dataclasses import replace

    ck = Checkpoint(make_provider, ids)
    snapshot = ck.name(ck.newest_snapshot(), "snapshot")
    damage(os.path.join(ck.directory, snapshot), "zero")
    fresh = ck.make(checkpoint_ids=ids)
    fresh._ctx.config = replace(fresh.config, repair_max_replay=2)  # the older base is 3 back
    with pytest.raises(CheckpointError) as e:
        ck.state(fresh, VERSIONS)
    msg = str(e.value)
    assert fresh.checkpoint.describe(snapshot) in msg and "repair.maxChangelogReplay=2" in msg, msg
    assert "replaying 3 changelogs" in msg, msg
    off = ck.make(checkpoint_ids=ids)
    off._ctx.config = replace(off.config, repair_max_replay=0)
    with pytest.raises(CheckpointError, match="repair is off"):
        ck.state(off, VERSIONS)


def test_a_deleted_snapshot_on_format_2_is_passed_over(make_provider) -> None:  # noqa: ANN001
    """Format 2 follows the lineage a changelog records, which ends at the snapshot its writer
    had: a deleted one is followed on below, through that version's changelog."""
    ck = Checkpoint(make_provider, True)
    os.unlink(os.path.join(ck.directory, ck.name(ck.newest_snapshot(), "snapshot")))
    fresh = ck.make(checkpoint_ids=True)
    assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    assert fresh.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 1


def test_a_missing_changelog_is_still_named(make_provider) -> None:  # noqa: ANN001
    ck = Checkpoint(make_provider, False)
    os.unlink(os.path.join(ck.directory, "7.changelog"))
    with pytest.raises(VersionNotFound, match=r"7\.changelog.*(missing|does not exist)"):
        ck.state(ck.make(), VERSIONS)


@pytest.mark.parametrize("ids", [False, True], ids=["format1", "format2"])
@pytest.mark.parametrize("kind", ["changelog", "snapshot", "sst"])
def test_bytes_appended_after_a_file_are_ignored(make_sst_provider, ids: bool, kind: str,  # noqa: ANN001
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """A writer that appended to a file instead of replacing it: the file before those bytes
    still verifies whole (its size and checksum were recorded when it was written), so it is read
    up to its end, with a WARN, and nothing needs repair; the checkpoint's file is left as it is."""
    ck = Checkpoint(make_sst_provider, ids)
    newest = ck.newest_snapshot()
    victim = {"changelog": ck.name(VERSIONS, "changelog"), "snapshot": ck.name(newest, "snapshot"),
              "sst": only_in(ck, ck.name(newest, "snapshot"))}[kind]
    path = os.path.join(ck.directory, victim)
    damage(path, "garbage")
    appended = open(path, "rb").read()
    fresh = ck.make(checkpoint_ids=ids)
    with caplog.at_level(logging.WARNING):
        assert ck.state(fresh, VERSIONS) == expected(VERSIONS)
    assert fresh.checkpoint.describe(victim) in caplog.text and "are ignored" in caplog.text
    assert fresh.drain_metrics()[M.SNAPSHOTS_AUTO_REPAIRED.name] == 0
    assert open(path, "rb").read() == appended


def test_a_changelog_cut_right_after_an_appended_footer_is_still_refused(make_sst_provider) -> None:
    """Only a footer whose sizes add up and whose checksum holds ends a file: garbage holding the
    end marker does not make a damaged file pass."""
    ck = Checkpoint(make_sst_provider, False)
    path = os.path.join(ck.directory, ck.name(VERSIONS, "changelog"))
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(path, "wb").write(bytes(data) + bytes(data[-28:]) + b"tail")  # a stale footer copy after it
    with pytest.raises(CheckpointError, match="corrupt|truncated"):
        ck.state(ck.make(), VERSIONS)
