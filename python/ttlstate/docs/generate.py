"""Write (or check) the generated parts of the docs site from the code's single definitions.

`docs/configuration.md` is generated whole from `ttlstate.config.keys`; any docs page may hold
generated tables between markers (`<!-- metrics-table -->` ... `<!-- /metrics-table -->`).
Regenerate with `make docs-gen` (or `python -m ttlstate.docs.generate docs`);
`python -m ttlstate.docs.generate --check docs` lists stale pages and exits 1, as the test does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ttlstate.config.keys import ALL_KEYS, PREFIX, PROVIDER_CLASS, PROVIDER_CLASS_KEY, Kind
from ttlstate.docs.tables import conf_table, metrics_spark_table, metrics_table

REGENERATE = "make docs-gen  (or: PYTHONPATH=python python -m ttlstate.docs.generate docs)"
CONFIGURATION_PAGE = "configuration.md"
# Tables any page may embed between `<!-- TAG -->` and `<!-- /TAG -->`.
MARKED_TABLES: dict[str, Callable[[], str]] = {"metrics-table": metrics_table,
                                               "metrics-spark-table": metrics_spark_table}

_CONFIGURATION_HEAD = f"""\
# Configuration reference

<!-- Generated from python/ttlstate/config/keys.py by `python -m ttlstate.docs.generate docs`
(`make docs-gen`); do not edit: tests/unit/test_docs.py fails when this page is stale. -->

Every key lives under `{PREFIX}` (only SQL confs with the `spark.sql.streaming.stateStore.`
prefix reach a provider on the executors). ttlstate is switched on by the provider class,
`{PROVIDER_CLASS_KEY}={PROVIDER_CLASS}`; how to set it and these keys for each way a job
starts: [launch modes](deployment.md#launch-modes).

**Validation.** A bad value fails the query at start with a message naming the key, the value
and what is allowed; an unknown key under the prefix is refused too (with the closest known
key, e.g. `Unknown ttlstate conf '...ttlstate.tll' (set to '5s'): did you mean
'...ttlstate.ttl'?`), so a typo never silently means "default". With the start checks
(`spark.sql.extensions=ttlstate.spark.TtlStateExtensions`) this happens in
`DataStreamWriter.start()`, before any batch; without them, in the query's first batch with
data. `ttlstate.configure()` checks the same rules before any query starts.

**`ttlstate.configure(builder, **options)`** sets these keys from the keyword arguments of the
table's `configure()` column, each a string as in a conf or a Python value of the key's kind.
Durations are strings with a unit (`"30m"`, `"5 seconds"`) or a `datetime.timedelta`; a bare
number (`ttl=5`, or `"5"` in a conf) is refused, as it has no unit. Sizes are strings such as
`"64m"` or `"1g"`, or ints (bytes); integers ints, booleans bools, and the choices of a key
strings or their Enum members (`ttlstate.config.keys.UpdateType.ON_READ_AND_WRITE`). A value of
another type is refused with a `TypeError` naming the option, the value and what it takes.
`operator_ttl` maps operator
ids (ints) or names (as progress shows them) to a TTL or `"off"`:
`operator_ttl={{"dedupe": "10m", 2: "off"}}`; an id beats a name, a name beats `ttl` (see
[where TTL applies](ttl-semantics.md#where-ttl-applies)).

**The state server's interpreter** follows PySpark's own settings, so the setup PySpark
documents needs no line of ttlstate's: `python` if set (`configure` sets it to the `python`
option if given, else to the driver's `PYSPARK_PYTHON`, the interpreter PySpark gives the
executors' Python workers), else `spark.pyspark.python` (on YARN, `./environment/bin/python` of
a venv shipped with `--archives venv.tar.gz#environment`, resolved in each container), else the
executor's `PYSPARK_PYTHON`, else, in local mode (the executor is the driver's JVM), the
driver's interpreter (`localModePython`, which `configure` records, or the Python process that
launched the JVM), else `python3`. That interpreter must have ttlstate installed. `configure`
refuses an absolute `python` that does not exist on the driver. The checks at query start
validate the confs with the driver's own interpreter: `spark.pyspark.driver.python`,
`PYSPARK_DRIVER_PYTHON`, `localModePython`, the Python that launched the driver JVM, then
`spark.pyspark.python`, `PYSPARK_PYTHON` and `python`, the first that runs on the driver (a
relative archive path counts only where it exists, as in YARN's cluster mode).

## Keys

"""

_CONFIGURATION_TAIL = """

Durations: `500ms`, `10s`, `30m`, `1.5h`, `2d`, `1w`, or Spark's interval syntax as
`withWatermark` and triggers take it: `10 seconds`, `1 hour`, `interval 1 hour 30 minutes`
(unit names singular or plural, any case; several terms add up; a result below a millisecond
is rounded down, as Spark does). Months and years are refused (no fixed length), and so is a
bare number (it has no unit), but `0` where a key takes 0:
{zero_keys}. `off` (or `none`, or empty) is a value of the keys that may be off:
{off_keys}.
Sizes: `64m`, `512m`, `2g` (units b, k, m, g; a bare number is bytes).
"""


def _tail() -> str:
    durations = [k for k in ALL_KEYS if k.kind is Kind.DURATION]
    return _CONFIGURATION_TAIL.format(
        zero_keys=", ".join(f"`{k.suffix}`" for k in durations if k.bounds and k.bounds[0] == 0),
        off_keys=", ".join(f"`{k.suffix}`" for k in durations if k.off))


def configuration_page() -> str:
    """The whole configuration reference page."""
    return _CONFIGURATION_HEAD + conf_table() + "\n" + _tail()


def fill_markers(text: str) -> str:
    """`text` with every marked table replaced by its freshly generated version."""
    for tag, make in MARKED_TABLES.items():
        start, end = f"<!-- {tag} -->", f"<!-- /{tag} -->"
        pieces = text.split(start)
        out = pieces[0]
        for piece in pieces[1:]:
            if end not in piece:
                raise ValueError(f"marker {start} has no closing {end}")
            _old, tail = piece.split(end, 1)
            out += f"{start}\n{make()}\n{end}{tail}"
        text = out
    return text


def expected_pages(docs_dir: Path) -> dict[Path, str]:
    """Every generated page under `docs_dir` and the text it must have."""
    pages = {docs_dir / CONFIGURATION_PAGE: configuration_page()}
    for page in sorted(docs_dir.rglob("*.md")):
        if page not in pages:
            text = page.read_text()
            if any(f"<!-- {tag} -->" in text for tag in MARKED_TABLES):
                pages[page] = fill_markers(text)
    return pages


def stale_pages(docs_dir: Path) -> list[Path]:
    """Generated pages whose text on disk differs from what the code defines (or is missing)."""
    return [p for p, text in expected_pages(docs_dir).items()
            if not p.exists() or p.read_text() != text]


def write_pages(docs_dir: Path) -> list[Path]:
    """Rewrite the stale generated pages; returns them."""
    stale = stale_pages(docs_dir)
    expected = expected_pages(docs_dir)
    for p in stale:
        p.write_text(expected[p])
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttlstate.docs.generate", description=__doc__)
    ap.add_argument("docs_dir", nargs="?", default="docs", help="the docs site's pages (default: docs)")
    ap.add_argument("--check", action="store_true", help="only list stale pages; exit 1 if any")
    args = ap.parse_args(argv)
    docs_dir = Path(args.docs_dir)
    if not docs_dir.is_dir():
        print(f"docs_dir '{docs_dir}' is not a directory (run from the repository root)", file=sys.stderr)
        return 2
    if args.check:
        stale = stale_pages(docs_dir)
        for p in stale:
            print(f"stale: {p}; regenerate: {REGENERATE}")
        return 1 if stale else 0
    for p in write_pages(docs_dir):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
