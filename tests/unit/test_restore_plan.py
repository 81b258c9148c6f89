"""Which files rebuild a version, and which files cleanup may delete."""

from __future__ import annotations

import pytest

from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.checkpoint.restore_plan import deletable_files, plan_from_snapshot, plan_restore


def cl(*vs: int) -> list[str]:
    return [f"{v}.changelog" for v in vs]


def sn(*vs: int) -> list[str]:
    return [f"{v}.snapshot" for v in vs]


def test_version_zero_is_empty_without_files() -> None:
    plan = plan_restore("s", [], 0, None)
    assert (plan.snapshot, plan.changelogs, plan.from_local) == (None, (), False)


def test_newest_snapshot_at_or_below_then_changelogs() -> None:
    files = cl(1, 2, 3, 4, 5, 6) + sn(2, 4, 6) + ["_metadata", "4.delta"]
    plan = plan_restore("s", files, 5, None)
    assert plan.snapshot == "4.snapshot"
    assert plan.changelogs == ("5.changelog",)


def test_local_state_is_reused_when_changelogs_reach_the_target() -> None:
    plan = plan_restore("s", cl(1, 2, 3, 4) + sn(3), 4, 2)
    assert plan.from_local and plan.changelogs == ("3.changelog", "4.changelog")


def test_local_state_newer_than_target_is_not_reused() -> None:
    plan = plan_restore("s", cl(1, 2, 3, 4), 2, 4)
    assert not plan.from_local and plan.changelogs == ("1.changelog", "2.changelog")


def test_missing_target_version_says_does_not_exist() -> None:
    with pytest.raises(VersionNotFound, match="does not exist") as e:
        plan_restore("op0", cl(1, 2), 3, None)
    assert e.value.file_name == "3.changelog" and e.value.version == 3


def test_gap_in_changelogs_names_the_missing_file() -> None:
    with pytest.raises(VersionNotFound, match="4.changelog") as e:
        plan_restore("s", cl(1, 2, 3, 5, 6) + sn(2), 6, None)
    assert "is missing" in str(e.value)


def test_snapshot_only_version_loads() -> None:
    plan = plan_restore("s", sn(7), 7, None)
    assert plan.snapshot == "7.snapshot" and plan.changelogs == ()


def test_cleanup_keeps_what_the_newest_versions_need_and_a_repair_of_their_snapshot() -> None:
    files = cl(*range(1, 14)) + sn(3, 6, 9, 12)
    # keep versions 10..13 loadable: they need snapshot 9 and changelogs 10..13; and should 9 be
    # found damaged, snapshot 6 and changelogs 7..9 rebuild it (repair.py)
    assert sorted(deletable_files(files, 4, 13, {3, 6, 9, 12})) == sorted(cl(1, 2, 3, 4, 5, 6) + sn(3))


def test_cleanup_deletes_nothing_without_two_old_enough_snapshots() -> None:
    assert deletable_files(cl(*range(1, 11)) + sn(9), 4, 10, {9}) == []
    assert deletable_files(cl(*range(1, 11)) + sn(3, 9), 4, 10, {3, 9}) == []  # 3 alone: no repair base
    assert deletable_files([], 3, 5, set()) == []


def test_cleanup_counts_back_from_the_served_version_not_the_newest_file() -> None:
    """Files above the version this writer serves may be another writer's (a second driver, a
    zombie task): retention neither deletes them nor counts back from them."""
    files = cl(*range(1, 31)) + sn(2, 5, 10, 20, 25)
    doomed = deletable_files(files, 4, 12, {2, 5, 10, 20, 25})  # serving 12: keep 9..12 (snapshots 5, 2)
    assert sorted(doomed) == sorted(cl(1, 2))
    assert all(int(n.split(".")[0]) <= 12 for n in doomed)


def test_cleanup_never_counts_on_a_snapshot_of_another_attempt() -> None:
    """An untrusted snapshot (another attempt's, or not yet checked) is no base: the changelogs
    below it stay, as they are what rebuilds those versions."""
    files = cl(*range(1, 11)) + sn(1, 3, 6)
    assert sorted(deletable_files(files, 4, 10, {1, 3})) == sorted(cl(1))
    assert deletable_files(files, 4, 10, {3}) == []
    assert deletable_files(files, 4, 10, set()) == []


def test_a_skipped_snapshot_is_not_a_base() -> None:
    """A snapshot holding another attempt's state (lineage.py) is passed over for an older base."""
    files = cl(*range(1, 8)) + sn(3, 6)
    plan = plan_restore("s", files, 7, None, frozenset({6}))
    assert plan.snapshot == "3.snapshot" and plan.changelogs == tuple(cl(4, 5, 6, 7))


def test_errors_name_what_the_checkpoint_holds() -> None:
    """One line an operator can act on: the versions there are, the snapshots to replay from."""
    with pytest.raises(VersionNotFound, match=r"holds versions 5-7,9: batch ids one lower"):
        plan_restore("s", cl(5, 6, 7) + sn(7, 9), 2, None)
    with pytest.raises(VersionNotFound, match=r"snapshotStartBatchId can be one of the batches "
                                              r"with a snapshot: 6, 8"):
        plan_from_snapshot("s", cl(*range(1, 10)) + sn(7, 9), 4, 9)
