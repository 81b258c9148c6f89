"""Checkpoint format 2 in `ttlstate repartition` (spark/repartition_ids.py): which recorded id is
which store's, and the commit log entry naming the new stores' ids, one list per new partition in
the operator's store order, all else as it was."""

from __future__ import annotations

import json

import pytest

from ttlstate.spark import repartition_ids as RI

ENTRY = 'v2\n{"nextBatchWatermarkMs":7,"stateUniqueIds":{"0":[["a0","b0"],["a1","b1"]],"1":[["c0"]]}}'


def test_format_2_is_told_by_the_commit_log_entry() -> None:
    assert RI.records_ids(ENTRY)
    assert not RI.records_ids('v1\n{"nextBatchWatermarkMs":0}')
    assert not RI.records_ids("v1\nnot json")
    with pytest.raises(RI.IdsError, match="records no state checkpoint ids .* for operator 2"):
        RI.partition_ids(RI.commit_entry(ENTRY), 2)


def test_each_store_is_found_by_the_file_its_id_names() -> None:
    ids = RI.partition_ids(RI.commit_entry(ENTRY), 0)[1]
    assert RI.store_id(ids, ["2_b1.changelog", "1_a1.changelog", "_metadata"], 2) == "b1"
    assert RI.store_id(ids, ["2_a1.snapshot"], 2) == "a1"
    assert RI.store_id(ids, ["1_b1.changelog", "2_zz.changelog"], 2) is None  # not of that version
    assert RI.store_order(ids, {"right": "b1", "left": "a1"}) == ["left", "right"]


def test_the_new_entry_names_the_new_ids_in_the_operators_order() -> None:
    report = [{"operator": 0, "store": s, "partition": p, "ckptId": f"{s}{p}n"}
              for s in ("left", "right") for p in range(3)]
    new = RI.new_ids(report, {"0": ["left", "right"]})
    assert new == {0: [["left0n", "right0n"], ["left1n", "right1n"], ["left2n", "right2n"]]}
    version, line = RI.with_ids(ENTRY, new).split("\n")
    assert version == "v2"
    assert json.loads(line) == {"nextBatchWatermarkMs": 7, "stateUniqueIds": {"0": new[0], "1": [["c0"]]}}
