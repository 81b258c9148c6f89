"""Markdown tables for the README, generated from the single definitions of keys and metrics.

`python -m ttlstate.docs.tables` prints them; a test checks the README contains every row.
"""

from __future__ import annotations

from ttlstate.config.keys import ALL_KEYS
from ttlstate.store.metric_names import ALL_METRICS


def conf_table() -> str:
    rows = ["| key | meaning | default | allowed values |", "|---|---|---|---|"]
    rows += [f"| `{k.key}` | {k.doc} | `{k.default}` | {k.allowed} |" for k in ALL_KEYS]
    return "\n".join(rows)


def metrics_table() -> str:
    rows = ["| metric | kind | meaning |", "|---|---|---|"]
    rows += [f"| `{m.name}` | {m.kind} | {m.desc} |" for m in ALL_METRICS]
    return "\n".join(rows)


if __name__ == "__main__":
    print(conf_table())
    print()
    print(metrics_table())
