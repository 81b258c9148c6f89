"""Markdown tables for the README and docs/, generated from the single definitions of keys and
metrics.

`python -m ttlstate.docs.tables README.md docs/metrics.md` rewrites the tables each file has in
place; tests check the files contain every row.
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


def conf_table() -> str:
    rows = ["| key | `configure()` option | meaning | default | allowed values |", "|---|---|---|---|---|"]
    rows += [f"| `{k.key}` | {configure_option(k)} | {k.doc} | `{k.default}` | {k.allowed} |"
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


def rewrite_readme(path: str) -> None:
    """Replace the text between the README's table markers with freshly generated tables."""
    with open(path) as f:
        text = f.read()
    for tag, table in (("conf-table", conf_table()), ("metrics-table", metrics_table()),
                       ("metrics-spark-table", metrics_spark_table())):
        start, end = f"<!-- {tag} -->", f"<!-- /{tag} -->"
        if start not in text:
            continue
        head, rest = text.split(start, 1)
        _old, tail = rest.split(end, 1)
        text = f"{head}{start}\n{table}\n{end}{tail}"
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 1:
        for arg in sys.argv[1:]:
            rewrite_readme(arg)
    else:
        print(conf_table())
        print()
        print(metrics_table())
