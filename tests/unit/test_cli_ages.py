"""`ttlstate inspect --ages`: last-access ages per operator, measured from the newest version's
recorded batch time, and what a --ttl would remove now, as a table, JSON and a PNG."""

from __future__ import annotations

import json
import os

import pytest

from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.cli.ages import StoreAges, operator_ages
from ttlstate.cli.main import main
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

HOUR = 3_600_000
T = 1_790_000_000_000  # the newest batch's time


@pytest.fixture
def checkpoint(tmp_path) -> str:  # noqa: ANN001
    """One store of operator 0 written in three batches: a, b 3 h before the last batch, c 30 min
    before it, d by it."""
    ck = tmp_path / "ck"
    directory = ck / "state" / "0" / "0"
    cfg = StoreConfig(TtlConfig(ttl_ms=7 * 24 * HOUR), EngineKind.ROCKSDICT)
    p = StoreProvider(store_label("0", "0", "default"), str(tmp_path / "local"),
                      LocalCheckpointLocation(str(directory)), cfg, ManualClock(0))
    for version, (now, keys) in enumerate([(T - 3 * HOUR, "ab"), (T - HOUR // 2, "c"), (T, "d")]):
        s = p.get_store(version, now_ms=now)
        for k in keys:
            s.put(k.encode(), b"v")
        s.commit()
    p.close()
    return str(ck)


def test_ages_table_and_what_a_ttl_would_remove(checkpoint: str, capsys, tmp_path) -> None:  # noqa: ANN001
    png = str(tmp_path / "ages.png")
    assert main(["inspect", checkpoint, "--ages", "--ttl", "1h", "--plot", png]) == 0
    out = capsys.readouterr().out
    assert "operator 0 (name unknown): 4 entries" in out
    assert "last access age: p50 30m, p90 3h, p99 3h, max 3h" in out
    assert "ttl 1h would remove 2 of 4 entries now (50.0%)" in out
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_ages_json_buckets_and_percentiles(checkpoint: str, capsys) -> None:  # noqa: ANN001
    assert main(["inspect", checkpoint, "--ages", "--ttl", "4h", "--json"]) == 0
    (op,) = json.loads(capsys.readouterr().out)["ages"]
    assert op["entries"] == 4 and op["removed_by_ttl"] == 0 and op["ttl_ms"] == 4 * HOUR
    assert op["percentiles_ms"] == {"p50": HOUR // 2, "p90": 3 * HOUR, "p99": 3 * HOUR, "max": 3 * HOUR}
    histogram = dict((label, n) for label, n in op["histogram"])
    assert histogram["0-1m"] == 1 and histogram["10m-1h"] == 1 and histogram["1h-6h"] == 2
    assert sum(histogram.values()) == 4


def test_plot_needs_ages(checkpoint: str, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        main(["inspect", checkpoint, "--plot", os.path.join(str(tmp_path), "x.png")])


def test_stores_without_a_recorded_time_are_counted_not_aged() -> None:
    from array import array

    stores = [StoreAges("1", "dedupe", None, array("q", [5, 6])),
              StoreAges("1", "dedupe", 100, array("q", [40]))]
    (op,) = operator_ages(stores, ttl_ms=50)
    assert (op.entries, op.unaged, op.removed_by_ttl, op.percentiles_ms["max"]) == (3, 2, 1, 60)
