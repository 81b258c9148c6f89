"""Damaged checkpoint files in a real query, as a user meets them: a dropDuplicates and a count
over a file source, snapshotInterval 2, five committed batches, then files of the newest
versions damaged (a byte flipped, cut to half, zeroed, deleted, garbage appended) and the query
restarted with new input.

ttlstate repairs a damaged snapshot (record file, SST manifest or SST file) from an older one
and the changelogs since, and its next batch's output equals that of the same query restarted
on the undamaged checkpoint; a damaged newest changelog, which nothing older replaces, fails the
query naming the file, and `ttlstate rollback` then takes the stopped query back to a batch that
rebuilds, after which it runs on exactly. Several stores of one query are damaged at once (one
kind of damage each), so one restart tries many cases.

`test_never_worse_than_sparks_rocksdb_provider` (make test-long) runs every case one restart at
a time on ttlstate and on Spark's RocksDB provider (with changelog checkpointing, which its
repair needs) and prints the table that docs/operations.md shows."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.damage import DAMAGES, damage
from tests.spark.harness import ROCKSDB, TTLSTATE, Run, poll_until, session
from ttlstate.checkpoint.record_file import KIND_CHANGELOG, verify_record_file
from ttlstate.checkpoint.sst_manifest import read_manifest
from ttlstate.cli.main import main as cli
from ttlstate.config import keys as K
from ttlstate.store import metric_names as M

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, g STRING"}
PARTITIONS = 5
FORMAT_KEY = "spark.sql.streaming.stateStore.checkpointFormatVersion"
# Five batches of new keys (and one repeat each), then the batch after the restart.
STEPS = [[{"k": f"k{i}-{j}", "g": f"g{j % 3}"} for j in range(8)] + [{"k": f"k{max(i - 1, 0)}-0", "g": "g0"}]
         for i in range(5)]
# New keys, and every key seen before once more: a deduplication that lost or changed a key lets
# its repeat through, so any state read wrong shows in the output.
AFTER = [{"k": f"new-{j}", "g": f"g{j % 3}"} for j in range(6)] + [r for rows in STEPS for r in rows]
SPARK_SNAPSHOTS = {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
                   "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
# Format 2 restores its SST snapshots in place (snapshot.readInPlace: the files read where they
# lie in the checkpoint), format 1 copies them, and `ranges` reads them in place through the
# shim's range service (checkpoint.localFiles off: the server reaches the checkpoint only through
# Hadoop, as on HDFS or S3): every way meets every damage. `ranges` also snapshots as its
# commits return (snapshot.afterCommit) and keeps no uploaded file on the local disk
# (snapshot.localMaxBytes=1): every file it reads once snapshotted is read through the shim.
VARIANTS = {
    "ttlstate-sst-format1": (TTLSTATE, {K.SNAPSHOT_INTERVAL.key: "2"}),
    "ttlstate-sst-format2": (TTLSTATE, {K.SNAPSHOT_INTERVAL.key: "2", FORMAT_KEY: "2",
                                        K.SNAPSHOT_READ_IN_PLACE.key: "true"}),
    "ttlstate-sst-ranges": (TTLSTATE, {K.SNAPSHOT_INTERVAL.key: "2", K.SNAPSHOT_READ_IN_PLACE.key: "true",
                                       K.CHECKPOINT_LOCAL_FILES.key: "false",
                                       K.SNAPSHOT_AFTER_COMMIT.key: "true",
                                       K.SNAPSHOT_LOCAL_MAX_BYTES.key: "1"}),
    "ttlstate-records-format1": (TTLSTATE, {K.SNAPSHOT_INTERVAL.key: "2", K.SNAPSHOT_LAYOUT.key: "records"}),
    "rocksdb-format1": (ROCKSDB, SPARK_SNAPSHOTS),
    "rocksdb-format2": (ROCKSDB, {**SPARK_SNAPSHOTS, FORMAT_KEY: "2"}),
}


def build(sources: dict[str, DataFrame]) -> DataFrame:
    return sources["events"].dropDuplicates(["k"]).groupBy("g").count()


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    s = session(confs={"spark.sql.shuffle.partitions": str(PARTITIONS)})
    yield s
    s.stop()


@dataclass
class Base:
    """A stopped query's checkpoint, every store snapshotted at least once (ttlstate's copies: but
    for `unsnapshot_newest_versions`), and the output of the batch after a restart on it undamaged."""

    variant: str
    run: Run
    expected: list[tuple]

    def stores(self) -> list[str]:
        state = os.path.join(self.run.checkpoint, "state")
        return [os.path.join(state, op, part) for op in sorted(os.listdir(state)) if op.isdigit()
                for part in sorted(os.listdir(os.path.join(state, op))) if part.isdigit()]

    def copy(self, cases: list[tuple[str, str]]) -> tuple[Run, list[str]]:
        """A copy of the checkpoint with each (file kind, damage) of `cases` done to a file of a
        store of its own; the run on it (not started) and the damaged files."""
        provider, confs = VARIANTS[self.variant]
        run = Run(self.run.spark, provider, build, SCHEMA, "update", confs, root=self.run.root)
        run.checkpoint = os.path.join(tempfile.mkdtemp(prefix="ttlstate-damaged-"), "ck")
        shutil.copytree(self.run.checkpoint, run.checkpoint, ignore=shutil.ignore_patterns(".*.tmp"))
        free = [os.path.join(run.checkpoint, os.path.relpath(s, self.run.checkpoint)) for s in self.stores()]
        ours, victims = provider == TTLSTATE, []
        if ours:
            unsnapshot_newest_versions(free)
        for kind, how in cases:
            store = next(s for s in free if victim(s, kind, ours) is not None)  # an empty one: no SST
            free.remove(store)
            victims.append(victim(store, kind, ours) or "")
            damage(victims[-1], how)
        run.step_no = len(STEPS)
        return run, victims

    def restart(self, cases: list[tuple[str, str]]) -> Run:
        """The query restarted with the next input on a copy of the checkpoint damaged as
        `cases` say (`copy`); returns the run (its query stopped)."""
        return resume(self.copy(cases)[0])


def resume(run: Run) -> Run:
    run.start()
    try:
        run.step(AFTER)
    finally:
        run.stop()
    return run


def version_of(name: str) -> int:
    """The version a checkpoint file (name or path) is of: `5.zip`, `5_<id>.changelog`."""
    return int(os.path.basename(name).split(".")[0].split("_")[0])


def newest(store: str, suffix: str) -> str:
    """The file of the newest version of that kind (`.changelog`, `.snapshot`, `.zip`)."""
    files = [n for n in os.listdir(store) if n.endswith(suffix) and not n.startswith(".")]
    return max(files, key=version_of)


def victim(store: str, kind: str, ttl: bool) -> str | None:
    """The file of a kind to damage in a store (`ttl`: ttlstate's, else Spark's RocksDB
    provider's): the newest changelog; the newest snapshot (a ttlstate record file or SST
    manifest, Spark's zip); an SST file only the newest snapshot names (any of its files when
    every one is shared with an older snapshot; None when it names none: an empty store). The
    changelog is one a load must read: of a version above the store's newest snapshot (None when
    maintenance snapshotted the newest version: then no changelog is read at all). A store left
    without a snapshot (`unsnapshot_newest_versions`) has no snapshot or SST file to damage."""
    suffix = ".snapshot" if ttl else ".zip"
    if not any(n.endswith(suffix) and not n.startswith(".") for n in os.listdir(store)):
        return os.path.join(store, newest(store, ".changelog")) if kind == "changelog" else None
    snapshot = os.path.join(store, newest(store, suffix))
    if kind == "changelog":
        changelog = newest(store, ".changelog")
        return os.path.join(store, changelog) if version_of(changelog) > version_of(snapshot) else None
    if kind == "snapshot":
        return snapshot
    if ttl:
        def named(path: str) -> set[str]:
            return set(read_manifest(path, verify_record_file(path, b"S")).names)
        mine = named(snapshot)
        older = set().union(*(named(os.path.join(store, n)) for n in os.listdir(store)
                              if n.endswith(".snapshot") and os.path.join(store, n) != snapshot))
        return os.path.join(store, sorted(mine - older or mine)[0]) if mine else None
    with zipfile.ZipFile(snapshot) as z:
        meta = z.read("metadata").decode().splitlines()
    files = sorted(f["dfsSstFileName"] for f in json.loads(meta[-1])["sstFiles"])
    return os.path.join(store, "SSTs", files[-1]) if files else None


def lineage_starts_from(snapshot: str) -> bool:
    """Whether the lineage the store's newest changelog records (checkpoint format 2) starts from
    this snapshot (`<version>_<id>.snapshot`): a load of the newest version then looks for it."""
    store = os.path.dirname(snapshot)
    lineage = verify_record_file(os.path.join(store, newest(store, ".changelog")), KIND_CHANGELOG).lineage
    version, ckpt_id = os.path.basename(snapshot).removesuffix(".snapshot").split("_", 1)
    if not lineage:
        return False
    return tuple(lineage[-1]) == (int(version), ckpt_id)


def make_base(spark: SparkSession, variant: str) -> Base:
    provider, confs = VARIANTS[variant]
    run = Run(spark, provider, build, SCHEMA, "update", confs)
    run.start()
    try:
        for rows in STEPS:
            run.step(rows)
        base = Base(variant, run, [])
        suffix = ".snapshot" if provider == TTLSTATE else ".zip"
        # maintenance runs every second (harness.session): wait for every store's first snapshot
        def snapshotted() -> bool:
            return all(any(n.endswith(suffix) for n in os.listdir(s)) for s in base.stores())
        assert poll_until(snapshotted, 60)
    finally:
        run.stop()
    base.expected = base.restart([]).outputs[len(STEPS)]
    return base


def unsnapshot_newest_versions(stores: list[str]) -> None:
    """Maintenance snapshots a store's newest version or not, as its timing falls: in every other
    store the newest version's snapshot is taken away (as if maintenance had not reached it; a
    store whose only snapshot it was, when maintenance lagged behind every batch, is left with
    none and replays its changelogs), so the checkpoint always holds stores whose newest
    changelog a load must read, and (the others) stores with a snapshot. Done to each copy, not
    to the base: the stopped query's stores stay loaded on the executor until maintenance
    unloads them, and its maintenance may snapshot their newest versions again meanwhile."""
    for store in stores[::2]:
        snapshots = [n for n in os.listdir(store) if n.endswith(".snapshot") and not n.startswith(".")]
        changelog = newest(store, ".changelog")
        top = max(snapshots, key=version_of)
        if version_of(top) == version_of(changelog):
            os.remove(os.path.join(store, top))


@pytest.fixture(scope="module")
def bases(spark: SparkSession) -> dict[str, Base]:
    return {}


def base_of(spark: SparkSession, bases: dict[str, Base], variant: str) -> Base:
    if variant not in bases:
        bases[variant] = make_base(spark, variant)
    return bases[variant]


def restart_metric(run: Run, metric: M.MetricName) -> int:
    """The metric's sum over the operators of the batch after the restart."""
    operators = run.progress_by_batch[len(STEPS)]["stateOperators"]
    return sum(int(op["customMetrics"].get(metric.name, 0)) for op in operators)


def repaired(run: Run) -> int:
    return restart_metric(run, M.SNAPSHOTS_AUTO_REPAIRED)


@pytest.mark.parametrize("variant", ["ttlstate-sst-format1", "ttlstate-sst-format2", "ttlstate-sst-ranges",
                                     "ttlstate-records-format1"])
def test_damaged_snapshots_are_repaired_exactly(spark: SparkSession, bases: dict[str, Base],
                                                variant: str) -> None:
    """Every damage to a snapshot, and (SST layout) to an SST file, each in a store of its own, in
    one restart: the output equals the undamaged checkpoint's, and each repair is counted."""
    base = base_of(spark, bases, variant)
    kinds = ["snapshot", "sst"] if "sst" in variant else ["snapshot"]
    cases = [(kind, how) for kind in kinds for how in DAMAGES]
    # Bytes appended after a file leave it whole: it is read up to its end (but see `seen`). A
    # deleted snapshot is not seen (nothing to repair, as for Spark) on format 1, where snapshots
    # are found by listing, and on format 2 unless the newest version's lineage starts from it
    # (maintenance may have written it after that version's changelog, which then names an
    # older base).
    def seen(kind: str, how: str, path: str) -> bool:
        if how == "garbage":
            # ... but for an SST file read in place through Hadoop's local file system, whose
            # checksum (.crc) of the file's last chunk no longer holds: it is passed over.
            return kind == "sst" and "ranges" in variant

        if (kind, how) != ("snapshot", "delete"):
            return True
        return "format2" in variant and lineage_starts_from(path)
    run, victims = base.copy(cases)  # (seen before the restart adds versions)
    expected_repairs = sum(seen(kind, how, path) for (kind, how), path in zip(cases, victims, strict=True))
    resume(run)
    assert run.outputs[len(STEPS)] == base.expected
    assert repaired(run) == expected_repairs
    in_place = VARIANTS[variant][1].get(K.SNAPSHOT_READ_IN_PLACE.key) == "true"
    assert (restart_metric(run, M.SST_FILES_READ_IN_PLACE) > 0) == in_place


@pytest.mark.parametrize(("variant", "how"), [("ttlstate-sst-format1", "flip"),
                                              ("ttlstate-sst-format2", "delete")])
def test_a_damaged_newest_changelog_fails_naming_it(spark: SparkSession, bases: dict[str, Base],
                                                    variant: str, how: str) -> None:
    base = base_of(spark, bases, variant)
    run, (path,) = base.copy([("changelog", how)])
    with pytest.raises(StreamingQueryException) as e:
        resume(run)
    msg = str(e.value)
    store, name = os.path.split(path)
    operator, partition = store.split(os.sep)[-2:]
    assert f"cannot load version {version_of(name)}" in msg and name in msg, msg
    assert f"operator {operator}, partition {partition}" in msg, msg


@pytest.mark.parametrize("variant", ["ttlstate-sst-format1", "ttlstate-sst-format2"])
def test_rollback_takes_the_stopped_query_back_and_it_runs_on_exactly(
        spark: SparkSession, bases: dict[str, Base], capsys: pytest.CaptureFixture[str],
        variant: str) -> None:
    """The newest changelog of one store is damaged: `rollback --dry-run` says what it would move
    and moves nothing; `rollback` moves the last batch out, and the restarted query re-runs it
    from its sources and goes on, batch for batch as the undamaged query did."""
    base = base_of(spark, bases, variant)
    run, (path,) = base.copy([("changelog", "truncate")])
    ck, last = run.checkpoint, os.path.basename(path)
    before = sorted(os.listdir(os.path.join(ck, "offsets")))

    assert cli(["rollback", "--dry-run", ck]) == 0
    out = capsys.readouterr().out
    batch = version_of(last) - 1  # the batch that wrote the damaged version
    assert f"rolling back from batch {batch} to batch {batch - 1}" in out and "would move" in out, out
    assert f"offsets/{batch}" in out and f"commits/{batch}" in out and last in out, out
    assert sorted(os.listdir(os.path.join(ck, "offsets"))) == before  # a dry run changes nothing

    assert cli(["rollback", ck]) == 0
    assert not os.path.exists(os.path.join(ck, "offsets", str(batch)))
    moved = os.path.join(ck, "_ttlstate_rollback")
    assert any(last in files for _d, _s, files in os.walk(moved))  # kept aside, not deleted

    run.start()
    try:
        run.settle()  # the rolled-back batch re-runs from the source's files
        run.step(AFTER)
    finally:
        run.stop()
    assert run.outputs[batch] == base.run.outputs[batch]
    assert run.outputs[len(STEPS)] == base.expected
    assert cli(["rollback", ck]) == 0
    assert "nothing to roll back" in capsys.readouterr().out


# -- the whole table, against Spark's RocksDB provider (make test-long) -----------------------------

def outcome(base: Base, kind: str, how: str) -> str:
    """exact (the undamaged output), wrong (another output), or fails: <its first line>."""
    try:
        run = base.restart([(kind, how)])
    except StreamingQueryException as e:
        ours = re.search(r"cannot load version \d+: checkpoint file \S+ [^\n]*", str(e))
        theirs = re.search(r"\[CANNOT_LOAD_STATE_STORE[^\n]*", str(e))
        found = ours or theirs
        return f"fails: {(found.group(0) if found else str(e).splitlines()[0]).strip()[:300]}"
    return "exact" if run.outputs[len(STEPS)] == base.expected else "WRONG"


@pytest.mark.long
def test_never_worse_than_sparks_rocksdb_provider(spark: SparkSession, bases: dict[str, Base]) -> None:
    """Every format x damage x file kind, one restart each, ttlstate (SST layout) against Spark's
    RocksDB provider: ttlstate is never wrong, and exact wherever Spark is."""
    table: dict[str, dict[str, str]] = {}
    for fmt in ("format1", "format2"):
        ours, theirs = base_of(spark, bases, f"ttlstate-sst-{fmt}"), base_of(spark, bases, f"rocksdb-{fmt}")
        for kind in ("changelog", "snapshot", "sst"):
            for how in DAMAGES:
                table[f"{fmt} {kind} {how}"] = {"ttlstate": outcome(ours, kind, how),
                                                "spark": outcome(theirs, kind, how)}
    print(json.dumps(table, indent=1))
    # One case may go Spark's way by luck: a changed byte of a changelog that decompresses to the
    # same records (LZ4 checks the records, not the file: the middle byte of its format 1 changelog
    # here is a match offset between equal bytes). ttlstate checks every byte it wrote and refuses
    # such a file, naming it; that is never a wrong result.
    def lucky(case: str, r: dict[str, str]) -> bool:
        return case.endswith("changelog flip") and r["ttlstate"].startswith("fails: cannot load")
    worse = {case: r for case, r in table.items()
             if r["ttlstate"] == "WRONG"
             or (r["spark"] == "exact" and r["ttlstate"] != "exact" and not lucky(case, r))}
    assert not worse, worse
