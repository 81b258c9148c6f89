"""The demo's output: every table column explained once, settings under their conf names, and a
plot in which every series is visible even where series are equal."""

from __future__ import annotations

from ttlstate.config import keys as K
from ttlstate.demo import runner
from ttlstate.demo.plot import figure, legend_labels, row_series
from ttlstate.demo.runner import COLUMNS, BatchStats


def stats(n: int = 8) -> list[BatchStats]:
    """All four series equal until batch 3 (nothing expired yet), then ttlstate levels off."""
    out = []
    for b in range(n):
        t, r = min(b + 1, 4) * 200, (b + 1) * 200
        out.append(BatchStats(b, 800, {"ttlstate/aggregation": t, "rocksdb/aggregation": r,
                                       "ttlstate/dropDuplicates": t, "rocksdb/dropDuplicates": r},
                              {"ttlstate": 1000 * b, "rocksdb": 3000 * b}, ttl_removed=b,
                              filter_removed=2 * b))
    return out


def test_every_column_is_explained_in_one_line() -> None:
    legend = runner.column_legend()
    assert len(legend) == len(COLUMNS)
    for c, line in zip(COLUMNS, legend, strict=True):
        assert line.split("  ")[1] == c.header and c.meaning in line and "\n" not in line
    # The columns that add up both ttlstate (or both RocksDB) queries say so.
    summed = [c for c in COLUMNS
              if c.header in ("ttl bytes", "rocksdb bytes", "read/incr-removed", "filter-removed")]
    assert all("both" in c.meaning and "together" in c.meaning for c in summed)
    header, row = runner.table_header(), runner.table_row(stats()[5])
    assert len(header) == len(row)  # aligned
    assert row.split() == ["5", "800", "800", "1200", "800", "1200", "5000", "15000", "5", "10"]


def test_settings_are_printed_under_their_conf_names() -> None:
    lines = runner.settings_lines("3s")
    assert all(line.strip().startswith("spark.") for line in lines)
    text = "\n".join(lines)
    assert f"{K.TTL.key}=3s" in text and f"{K.INCREMENTAL_SIZE.key}=50" in text
    assert f"{K.FILTER_COMPACT_EVERY.key}=4" in text and f"{K.SNAPSHOT_INTERVAL.key}=5" in text
    assert "spark.sql.shuffle.partitions=2" in text
    assert not any(opt in text for opt in runner.DEMO_OPTIONS)  # no Python keyword names


def test_every_series_is_visible_where_series_are_equal() -> None:
    series = row_series("3s")
    assert len({s.marker for s in series}) == len({s.color for s in series}) == len(series) == 4
    widths = [s.linewidth for s in series]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 4  # each one inside the one before
    labels = legend_labels(stats(), series)
    assert labels["ttlstate/dropDuplicates"].endswith("(same as ttlstate (TTL 3s) aggregation)")
    assert labels["rocksdb/dropDuplicates"].endswith("(same as Spark RocksDB aggregation)")
    assert "same as" not in labels["ttlstate/aggregation"]
    fig = figure(stats(), "3s")
    try:
        lines = fig.axes[0].get_lines()
        assert [ln.get_marker() for ln in lines] == [s.marker for s in series]
        assert [ln.get_linewidth() for ln in lines] == widths
        assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [labels[s.key] for s in series]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_the_kafka_connector_named_is_the_one_of_the_running_sparks_scala() -> None:
    """`ttlstate demo --kafka` without the connector names the package to add: Spark 3.5's is a
    Scala 2.12 build, 4.x's 2.13 (a _2.13 connector on Spark 3.5 fails to load)."""
    from ttlstate.demo.kafka import connector_package

    assert connector_package("3.5.9") == "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.9"
    assert connector_package("4.1.4") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.4"
