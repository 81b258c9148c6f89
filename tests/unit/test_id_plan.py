"""The format 2 restore rule: the newest base on the lineage of (version, id)."""

from __future__ import annotations

import pytest

from ttlstate.checkpoint.errors import VersionNotFound
from ttlstate.checkpoint.id_plan import EMPTY, plan_by_id

LINEAGE = ((4, "d"), (3, "c"), (2, "b"), (1, "a"), (0, EMPTY))
ALL = [f"{v}_{i}.changelog" for v, i in ((5, "e"), *LINEAGE[:-1])]


def test_empty_base_when_no_snapshot_is_on_the_lineage() -> None:
    plan = plan_by_id("s", ALL + ["3_other.snapshot"], 5, "e", LINEAGE, None)
    assert (plan.base_version, plan.snapshot, plan.from_local) == (0, None, False)
    assert plan.changelogs == ("1_a.changelog", "2_b.changelog", "3_c.changelog", "4_d.changelog",
                               "5_e.changelog")


def test_newest_snapshot_or_local_state_on_the_lineage_wins() -> None:
    plan = plan_by_id("s", ALL + ["2_b.snapshot", "3_x.snapshot"], 5, "e", LINEAGE, None)
    assert plan.snapshot == "2_b.snapshot" and plan.changelogs[0] == "3_c.changelog"
    plan = plan_by_id("s", ALL + ["2_b.snapshot"], 5, "e", LINEAGE, (3, "c"))
    assert plan.from_local and plan.changelogs == ("4_d.changelog", "5_e.changelog")
    assert not plan_by_id("s", ALL, 5, "e", LINEAGE, (3, "other")).from_local
    plan = plan_by_id("s", ALL + ["5_e.snapshot"], 5, "e", (), None)
    assert plan.snapshot == "5_e.snapshot" and plan.changelogs == ()


def test_a_lineage_whose_base_is_gone_names_it() -> None:
    with pytest.raises(VersionNotFound, match="2_b.snapshot"):
        plan_by_id("s", ALL, 5, "e", LINEAGE[:3], None)


def test_from_a_named_snapshot() -> None:
    plan = plan_by_id("s", ALL + ["2_b.snapshot", "4_d.snapshot"], 5, "e", LINEAGE, (3, "c"),
                      from_snapshot=(2, "b"))
    assert plan.snapshot == "2_b.snapshot" and not plan.from_local
    with pytest.raises(VersionNotFound, match="not on the lineage"):
        plan_by_id("s", ALL + ["2_b.snapshot"], 5, "e", LINEAGE, None, from_snapshot=(2, "zz"))
    with pytest.raises(VersionNotFound, match="3_c.snapshot is missing"):
        plan_by_id("s", ALL, 5, "e", LINEAGE, None, from_snapshot=(3, None))
