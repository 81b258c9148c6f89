"""docs/metrics.md and docs/clocks.md must describe what the code defines."""

from __future__ import annotations

from pathlib import Path

from ttlstate.config import keys as K
from ttlstate.docs.tables import metrics_spark_table
from ttlstate.store.metric_names import ALL_METRICS, RENAMED

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_metric_row_is_in_docs_metrics() -> None:
    text = (DOCS / "metrics.md").read_text()
    missing = [row for row in metrics_spark_table().splitlines()[2:] if row not in text]
    assert not missing, "docs/metrics.md is stale; regenerate: make docs-gen"


def test_every_renamed_metric_is_listed_with_its_new_name() -> None:
    text = (DOCS / "metrics.md").read_text()
    current = {m.name for m in ALL_METRICS}
    for old, new in RENAMED.items():
        assert new in current and old not in current
        assert f"| `{old}` | `{new}`" in text


def test_docs_clocks_covers_every_time_source_and_key() -> None:
    text = (DOCS / "clocks.md").read_text()
    for source in K.TimeSource:
        assert f"| `{source.value}`" in text
    for key in (K.TIME_SOURCE, K.CLOCK_MAX_GAP):
        assert f"`{key.key}` | `{key.default}`" in text
