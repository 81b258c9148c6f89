"""The README's conf and metric tables must list every key and metric the code defines."""

from __future__ import annotations

from pathlib import Path

from ttlstate.docs.tables import conf_table, metrics_table

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_conf_key_row_is_in_readme() -> None:
    missing = [row for row in conf_table().splitlines()[2:] if row not in README]
    assert not missing, "README conf table is stale; regenerate: python -m ttlstate.docs.tables README.md"


def test_every_metric_row_is_in_readme() -> None:
    missing = [row for row in metrics_table().splitlines()[2:] if row not in README]
    assert not missing, "README metrics table is stale; regenerate: python -m ttlstate.docs.tables README.md"
