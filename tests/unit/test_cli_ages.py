"""`ttlstate inspect` and its `--ages` advisor: one time (the last batch's, by default) for the
table's expired rows and the ages, said in the output; no warning about settings inspect chose;
numeric order; histogram buckets that fit the ages; a plot whose legend covers no bar."""

from __future__ import annotations

import json
import logging
import os

import pytest

from ttlstate.checkpoint.identity import store_label
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.cli.age_buckets import bucket_counts, bucket_edges
from ttlstate.cli.ages import StoreAges, operator_ages
from ttlstate.cli.main import main
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

HOUR = 3_600_000
T = 1_790_000_000_000  # the newest batch's time (2026-09-21: months before this test runs)


def write_store(root: str, part: str, batches: list[tuple[int, str]], ttl_ms: int = 7 * 24 * HOUR,
                op: str = "0") -> None:
    """One store of operator `op`, partition `part`: per batch, (its time, the keys it writes)."""
    cfg = StoreConfig(TtlConfig(ttl_ms=ttl_ms), EngineKind.ROCKSDICT)
    location = LocalCheckpointLocation(os.path.join(root, "ck", "state", op, part))
    p = StoreProvider(store_label(op, part, "default"), os.path.join(root, f"local-{op}-{part}"), location,
                      cfg, ManualClock(0))
    for version, (now, keys) in enumerate(batches):
        s = p.get_store(version, now_ms=now)
        for k in keys:
            s.put(k.encode(), b"v")
        s.commit()
    p.close()


@pytest.fixture
def checkpoint(tmp_path) -> str:  # noqa: ANN001
    """One store of operator 0 written in three batches: a, b 3 h before the last batch, c 30 min
    before it, d by it."""
    write_store(str(tmp_path), "0", [(T - 3 * HOUR, "ab"), (T - HOUR // 2, "c"), (T, "d")])
    return str(tmp_path / "ck")


def test_ages_table_and_what_a_ttl_would_remove(checkpoint: str, capsys, tmp_path) -> None:  # noqa: ANN001
    png = str(tmp_path / "ages.png")
    assert main(["inspect", checkpoint, "--ages", "--ttl", "1h", "--plot", png]) == 0
    out = capsys.readouterr().out
    assert "operator 0 (name unknown): 4 entries" in out
    assert "last access age: p50 30m, p90 3h, p99 3h, max 3h" in out
    assert "ttl 1h would have removed 2 of 4 entries by then (50.0%)" in out
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_table_and_the_ages_count_at_one_time_and_say_which(checkpoint: str, capsys) -> None:  # noqa: ANN001
    """Both at the last batch's time, not one at this machine's clock: months after T every
    entry would be expired by the clock, while by the last batch a 1h TTL removes 2 of 4."""
    assert main(["inspect", checkpoint, "--ages", "--ttl", "1h"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"expired rows counted at the last batch's time, 2026-09-21T14:13:20.000Z ({T} ms)"
    assert "  operator 0 (name unknown): 1 stores, 4 rows, 2 expired, TTL 1h" in out
    assert f"last-access ages at the last batch's time, 2026-09-21T14:13:20.000Z ({T} ms):" in out
    assert "  ttl 1h would have removed 2 of 4 entries by then (50.0%)" in out
    assert main(["inspect", checkpoint, "--ttl", "1h", "--at", "+45m", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["atMs"] == T + 45 * 60_000
    assert report["countedAt"].startswith("45m after the last batch's time")
    assert report["operators"][0]["expired_rows"] == 3  # c, 30 min before the last batch, too


def test_inspect_does_not_warn_about_the_settings_it_opens_stores_with(checkpoint: str, capsys,  # noqa: ANN001
                                                                       caplog) -> None:  # noqa: ANN001
    with caplog.at_level(logging.WARNING):
        assert main(["inspect", checkpoint]) == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert "1 stores, 4 rows, 0 expired, TTL 7d" in capsys.readouterr().out  # the recorded TTL


def test_operators_and_partitions_in_numeric_order(tmp_path, capsys) -> None:  # noqa: ANN001
    for part in ("0", "1", "2", "10"):
        write_store(str(tmp_path), part, [(T, "k" + part)])
    assert main(["inspect", str(tmp_path / "ck"), "--json"]) == 0
    assert [s["partition"] for s in json.loads(capsys.readouterr().out)["stores"]] == ["0", "1", "2", "10"]


def test_ages_json_buckets_and_percentiles(checkpoint: str, capsys) -> None:  # noqa: ANN001
    assert main(["inspect", checkpoint, "--ages", "--ttl", "4h", "--json"]) == 0
    (op,) = json.loads(capsys.readouterr().out)["ages"]
    assert op["entries"] == 4 and op["removed_by_ttl"] == 0 and op["ttl_ms"] == 4 * HOUR
    assert op["percentiles_ms"] == {"p50": HOUR // 2, "p90": 3 * HOUR, "p99": 3 * HOUR, "max": 3 * HOUR}
    histogram = dict((label, n) for label, n in op["histogram"])
    assert histogram["0-30m"] == 1 and histogram["30m-1h"] == 1 and histogram["3h-4h"] == 2
    assert sum(histogram.values()) == 4 and op["edges_ms"][-1] == 4 * HOUR  # the TTL is an edge


def test_a_short_ttl_tests_entries_spread_over_several_bars(tmp_path, capsys) -> None:  # noqa: ANN001
    """Batches a second apart and a TTL of seconds: not one bar of `0-1m`."""
    write_store(str(tmp_path), "0", [(T + i * 1000, f"k{i}") for i in range(8)], ttl_ms=3000)
    assert main(["inspect", str(tmp_path / "ck"), "--ages", "--ttl", "3s", "--json"]) == 0
    (op,) = json.loads(capsys.readouterr().out)["ages"]
    assert sum(1 for _, n in op["histogram"] if n) >= 4
    removed = sum(n for label, n in op["histogram"] if label.split("-")[0].lstrip(">=") in
                  {"3s", "3500ms", "4s", "4500ms", "5s", "5500ms", "6s", "6500ms", "7s"})
    assert removed == op["removed_by_ttl"] == 5  # the bars from the TTL on are what it removes


@pytest.mark.parametrize(("ages", "bars_at_least"), [
    ([0, 1000, 2000, 3000, 4000, 5000], 5), ([0, 30_000, 3 * HOUR, 2 * 86_400_000], 4), ([0, 0], 1)])
def test_bucket_edges_fit_the_ages(ages: list[int], bars_at_least: int) -> None:
    edges = bucket_edges(ages)
    assert edges == sorted(set(edges)) and len(edges) + 1 <= 11
    assert sum(1 for n in bucket_counts(ages, edges) if n) >= bars_at_least


def test_the_plot_draws_age_zero_in_its_first_bar_and_its_legend_outside_the_bars(checkpoint: str) -> None:
    from array import array

    from ttlstate.cli.age_plot import figure_of

    stores = [StoreAges("0", "dedupe", T, array("q", [T] * 50 + [T - 1000] * 10 + [T - 2 * HOUR] * 40))]
    fig = figure_of(operator_ages(stores, ttl_ms=HOUR))
    fig.canvas.draw()
    (ax,) = fig.axes
    assert ax.get_xscale() == "linear"  # no log axis from an age of 0 drawn at 1 ms
    assert ax.get_xticklabels()[0].get_text().startswith("0-")
    legend = ax.get_legend().get_window_extent()
    bars = [b.get_window_extent() for b in ax.patches]
    assert bars and not any(legend.overlaps(b) for b in bars)
    assert not legend.overlaps(ax.get_window_extent())


def test_plot_needs_ages(checkpoint: str, tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit):
        main(["inspect", checkpoint, "--plot", os.path.join(str(tmp_path), "x.png")])


def test_plot_without_matplotlib_says_how_to_get_it(checkpoint: str, tmp_path,  # noqa: ANN001
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    png = os.path.join(str(tmp_path), "ages.png")
    with pytest.raises(SystemExit) as e:
        main(["inspect", "--ages", checkpoint, "--plot", png])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert "--plot draws the histogram with matplotlib, which is not installed here" in err
    assert "pip install 'ttlstate[demo]'" in err and "Traceback" not in err
    assert not os.path.exists(png)


def test_stores_without_a_recorded_time_are_counted_not_aged() -> None:
    from array import array

    stores = [StoreAges("1", "dedupe", None, array("q", [5, 6])),
              StoreAges("1", "dedupe", 100, array("q", [40]))]
    (op,) = operator_ages(stores, ttl_ms=50)
    assert (op.entries, op.unaged, op.removed_by_ttl, op.percentiles_ms["max"]) == (3, 2, 1, 60)
