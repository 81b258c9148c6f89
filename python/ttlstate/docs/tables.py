"""Markdown tables of every conf key and metric, generated from their single definitions.

`ttlstate.docs.generate` writes them into the docs pages (`docs/configuration.md` whole, the
metrics table between markers); `tests/unit/test_docs.py` fails when a page is stale.
"""

from __future__ import annotations

from ttlstate.config.keys import ALL_KEYS, OPERATOR_NAME_TTL, OPERATOR_TTL, ConfKey
from ttlstate.store.metric_names import ALL_METRICS


def configure_option(k: ConfKey) -> str:
    """How `ttlstate.configure(builder, ...)` sets the key."""
    if k is OPERATOR_TTL:
        return '`operator_ttl={3: "10m"}`'
    if k is OPERATOR_NAME_TTL:
        return '`operator_ttl={"dedupe": "10m"}`'
    return f"`{k.option}`"


def _default(k: ConfKey) -> str:
    return f"`{k.default}`" if k.default else "(unset)"


def conf_table() -> str:
    rows = ["| key | `configure()` option | meaning | default | allowed values |", "|---|---|---|---|---|"]
    rows += [f"| `{k.key}` | {configure_option(k)} | {k.doc} | {_default(k)} | {k.allowed} |"
             for k in ALL_KEYS]
    return "\n".join(rows)


def metrics_table() -> str:
    rows = ["| metric | kind | meaning |", "|---|---|---|"]
    rows += [f"| `{m.name}` | {m.kind} | {m.desc} |" for m in ALL_METRICS]
    return "\n".join(rows)


def metrics_spark_table() -> str:
    """docs/metrics.md's table: each metric with what a Spark user already reads for it."""
    rows = ["| metric | kind | meaning | Spark equivalent |", "|---|---|---|---|"]
    rows += [f"| `{m.name}` | {m.kind} | {m.desc} | {m.spark} |" for m in ALL_METRICS]
    return "\n".join(rows)

