"""Provider variants a benchmark compares: a provider class, its confs, and which code runs it.

Conf keys are spelled out here instead of imported from `ttlstate.config`: a variant may run
an older ttlstate checkout (`--baseline`), and the benchmark's child processes must not depend
on the internals of whichever package they import. `tests/unit/test_benchmarks_smoke.py`
checks these names against the package's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from benchmarks.harness.baseline import Baseline

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
TTLSTATE = "ttlstate.spark.TtlStateStoreProvider"
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
TTL_PREFIX = "spark.sql.streaming.stateStore.ttlstate."
TTL_KEY = TTL_PREFIX + "ttl"
SNAPSHOT_INTERVAL_KEY = TTL_PREFIX + "snapshotInterval"
KEY_FILTER_KEY = TTL_PREFIX + "keyFilter.maxKeys"
SNAPSHOT_LAYOUT_KEY = TTL_PREFIX + "snapshot.layout"
READ_IN_PLACE_KEY = TTL_PREFIX + "snapshot.readInPlace"
LOCAL_FILES_KEY = TTL_PREFIX + "checkpoint.localFiles"
AFTER_COMMIT_KEY = TTL_PREFIX + "snapshot.afterCommit"
LOCAL_MAX_BYTES_KEY = TTL_PREFIX + "snapshot.localMaxBytes"
LOCAL_FILL_KEY = TTL_PREFIX + "snapshot.localFill"
CACHE_KEY = TTL_PREFIX + "cache.maxBytes"
READ_AHEAD_KEY = TTL_PREFIX + "readAhead.chunkRows"
WORKERS_KEY = TTL_PREFIX + "workers"
MEMORY_KEY = TTL_PREFIX + "memory.maxBytes"
COMPACT_EVERY_KEY = TTL_PREFIX + "cleanup.compactionFilter.compactEvery"
TRANSFORM_WITH_STATE_KEY = TTL_PREFIX + "transformWithState"
CHANGELOG_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"


@dataclass(frozen=True)
class Variant:
    """One provider configuration, run by this tree's ttlstate or by a baseline checkout."""

    name: str
    provider_class: str
    confs: Mapping[str, str] = field(default_factory=dict)
    baseline: Baseline | None = None

    @property
    def is_ttlstate(self) -> bool:
        return self.provider_class == TTLSTATE

    def at(self, baseline: Baseline) -> Variant:
        """The same configuration run by the baseline's code, named `<name>@<shortsha>`."""
        return replace(self, name=f"{self.name}@{baseline.short}", baseline=baseline)

    def env(self) -> dict[str, str]:
        """The environment of the child process (and so of its JVM and state server)."""
        env = dict(self.baseline.env) if self.baseline else dict(os.environ)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env.setdefault("TTLSTATE_LOG_LEVEL", "WARNING")
        return env

    def check_code(self, used: list[str | None], server_files: list[str]) -> None:
        """A baseline variant must have imported the old package and loaded its jar (`used`:
        ttlstate.__file__ of its drivers, the shim jars on spark.jars) and its state server must
        have mapped the old native extension (`server_files`); anything else would compare the
        current code with itself."""
        if self.baseline is None:
            return
        tree = self.baseline.tree + os.sep
        wrong = [f for f in [*used, *server_files] if not str(f).startswith(tree)]
        if wrong or not server_files:
            raise RuntimeError(f"{self.name} did not run only the code in {tree}: driver {used}, "
                               f"state server {server_files}")

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "provider_class": self.provider_class, "confs": dict(self.confs),
                "baseline": self.baseline.describe() if self.baseline else None}


def pick(table: Mapping[str, Variant], names: str) -> list[Variant]:
    """The variants named in a comma-separated list, in that order."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in table]
    if unknown:
        raise SystemExit(f"unknown provider variant(s) {unknown}; known: {sorted(table)}")
    return [table[n] for n in wanted]


def with_baseline(variants: list[Variant], baseline: Baseline | None, twins: str) -> list[Variant]:
    """variants, each of those named in `twins` followed by its run on the baseline's code."""
    if baseline is None:
        return variants
    names = {n.strip() for n in twins.split(",")}
    out: list[Variant] = []
    for v in variants:
        out.append(v)
        if v.name in names and v.is_ttlstate:
            out.append(v.at(baseline))
    return out


def baseline_twin(v: Variant, variants: list[Variant]) -> Variant | None:
    """The run of this tree's variant `v` by the baseline's code (`with_baseline`), if any."""
    if v.baseline is not None:
        return None
    return next((w for w in variants if w.baseline is not None and w.name.split("@")[0] == v.name), None)


def ratio(value: object, reference: object, digits: int = 3) -> float | None:
    """value / reference, or None when either is missing or the reference is 0."""
    if not isinstance(value, (int, float)) or not isinstance(reference, (int, float)) or not reference:
        return None
    return round(float(value) / float(reference), digits)
