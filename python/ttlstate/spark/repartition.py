"""`ttlstate repartition CHECKPOINT --partitions N`: a stopped query's state moved to another
number of state partitions, so that it restarts with N partitions (`spark.sql.shuffle.partitions`,
which Spark otherwise keeps for a checkpoint's life) and finds every key where Spark routes it.

How (repartition_plan.py says what moves where; Repartition.scala is the Spark job):

1. Stage, beside the checkpoint's state, in `<checkpoint>/_ttlstate_repartition/`: a Spark job
   reads every store's version of the last committed batch on the executors, routes each entry by
   Spark's own hash partitioning of its key, and writes the new stores as that same version, as
   whole TtlValues (each entry keeps its last-access timestamp) recording the TTL settings and
   batch time the old files recorded; Spark's operator metadata (the new partition count) and
   schema files go beside them. The checkpoint itself is not touched: killed here, the query
   restarts as it was.
2. Switch: the old `state/` folder moves into the staging folder, the offset log entry of the last
   committed batch is replaced (atomically) by one with the new count, and the new state folder
   is renamed to `state/`: that rename is the switch. In between the checkpoint has no `state/`
   folder, so a query restarted there fails at its first load instead of reading misplaced state;
   and `ttlstate repartition` run again finishes the switch.
3. The staging folder, with the old state, is deleted.

The restarted query re-runs nothing: its next batch reads the new stores at the version the old
ones had, with the batch times they recorded, so TTL counts on exactly as it would have.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

from ttlstate.checkpoint import names
from ttlstate.config.conf_key import PREFIX
from ttlstate.faults import crash_point
from ttlstate.spark import repartition_ids as RI
from ttlstate.spark import repartition_plan as RP
from ttlstate.spark.checkpoint_fs import CheckpointFs
from ttlstate.spark.job_options import add_job_options, job_session
from ttlstate.spark.repartition_headers import check_differing_settings, header
from ttlstate.spark.tools_jar import ToolError, call

STAGING = "_ttlstate_repartition"
TOOL = "ttlstate.tools.repartition.Repartition"


class RepartitionError(RuntimeError):
    pass


def _store_dir(op: int, partition: int, store: str) -> str:
    return f"state/{op}/{partition}" + ("" if store == "default" else f"/{store}")


def _checkpoint(spark: Any, fs: CheckpointFs) -> RP.Checkpoint:
    """What the plan needs to know of the checkpoint (read only)."""
    offsets, commits = _ids(fs, "offsets"), _ids(fs, "commits")
    last = commits[-1] if commits else None
    text = fs.read_text(f"offsets/{last}") if last is not None and last in offsets else None
    layout = call(spark, TOOL, "describe", spark.sparkContext._jsc.sc(), fs.root + "/state")
    operators = RP.operators_of(str(layout))
    ck = RP.Checkpoint(fs.root, offsets, commits, text, operators)
    if last is not None and text is not None:
        commit = fs.read_text(f"commits/{last}")
        ck.format2 = RP.is_format2(RP.offset_confs(text)) or RI.records_ids(commit)
        if ck.format2:
            _find_ids(fs, ck, commit)
    if last is not None:
        for op in operators:
            for store in op.stores:
                files = {}
                for p in op.partitions:
                    found = header(fs, _store_dir(op.id, p, store.name), last + 1,
                                   ck.ids.get((op.id, p, store.name), ""))
                    ck.headers[(op.id, p, store.name)] = None if found is None else found[1]
                    if found is not None:
                        files[p] = found
                check_differing_settings(fs, files)
    return ck


def _find_ids(fs: CheckpointFs, ck: RP.Checkpoint, commit: str) -> None:
    """Checkpoint format 2: each old store's id at the version to move, as the last committed
    batch's commit log entry (`commit`) recorded it, and each operator's stores in the order that
    entry lists them."""
    batch = ck.commits[-1]
    try:
        entry = RI.commit_entry(commit)
        for op in ck.operators:
            recorded = RI.partition_ids(entry, op.id)
            for p in op.partitions:
                candidates = recorded[p] if p < len(recorded) else []
                found = {s.name: RI.store_id(candidates, fs.list(_store_dir(op.id, p, s.name)), batch + 1)
                         for s in op.stores}
                for name, i in found.items():
                    if i is not None:
                        ck.ids[(op.id, p, name)] = i
                if p == op.partitions[0]:
                    ck.id_order[op.id] = RI.store_order(candidates, {s: i for s, i in found.items() if i})
    except RI.IdsError as e:
        raise RP.Refused(f"{fs.root}: {e}") from None


def _read_confs(spark: Any) -> dict[str, str]:
    """The session's ttlstate confs (how the stores are opened: engine, interpreter, workers),
    without per-operator TTLs: the new stores record what the old ones did."""
    confs = {row[0]: row[1] for row in spark.sql("SET").collect()}  # RuntimeConfig.getAll: 4.0+
    return {k: v for k, v in confs.items() if k.startswith(PREFIX) and not k.startswith(PREFIX + "operator.")}


def _progress(spark: Any, done: threading.Event, out: Any) -> None:
    """Prints `stores read k/n` and `stores written k/n` while the job runs."""
    tracker = spark.sparkContext.statusTracker()
    shown: dict[str, tuple[int, int]] = {}
    while not done.wait(0.5):
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is None or not info.name.startswith("ttlstate repartition: "):
                continue
            what = "read" if info.name.endswith("read stores") else "written"
            now = (info.numCompletedTasks, info.numTasks)
            if shown.get(what) != now:
                shown[what] = now
                print(f"ttlstate repartition: stores {what} {now[0]}/{now[1]}", file=out, flush=True)


def _stage_metadata(fs: CheckpointFs, ck: RP.Checkpoint, plan: RP.Plan) -> None:
    """Spark's files beside the new stores: the query's identity, each operator's metadata (with
    the new partition count) and schema files, as a query started with the new count has them."""
    fs.copy("metadata", f"{STAGING}/metadata")
    for op in ck.operators:
        new = next(g["newPartitions"] for g in plan.groups if g["operator"] == op.id)
        src, dst = f"state/{op.id}", f"{STAGING}/state/{op.id}"
        for name in fs.list(src):
            if name.startswith("_"):
                fs.copy(f"{src}/{name}", f"{dst}/{name}")
        # v1: one file; v2 (transformWithState's): one per batch that changed it, of which the
        # newest up to the last committed batch describes the state moved
        v2 = [b for b in _ids(fs, f"{dst}/_metadata/v2") if b <= plan.batch]
        for metadata in [f"{dst}/_metadata/metadata"] + [f"{dst}/_metadata/v2/{b}" for b in v2[-1:]]:
            if fs.exists(metadata):
                text = RP.operator_metadata_with_partitions(fs.read_text(metadata), new)
                fs.write(metadata, text.encode(), overwrite=True)
        for p in (p for p in op.partitions if p < new):
            for folder in {_store_dir(op.id, p, s.name) for s in op.stores} | {f"state/{op.id}/{p}"}:
                for name in fs.list(folder):
                    if name.startswith("_"):
                        fs.copy(f"{folder}/{name}", f"{STAGING}/{folder}/{name}")


def _stage(spark: Any, fs: CheckpointFs, ck: RP.Checkpoint, plan: RP.Plan, out: Any) -> list[dict]:
    """Step 1: the new state, complete, in the staging folder; returns the job's report."""
    fs.delete(STAGING)
    staged = {"batch": plan.batch, "version": plan.version, "from": plan.old_partitions,
              "to": plan.new_partitions, "idOrder": plan.id_order}
    fs.write(f"{STAGING}/plan.json", json.dumps(staged).encode())
    _stage_metadata(fs, ck, plan)
    done = threading.Event()
    watcher = threading.Thread(target=_progress, args=(spark, done, out), daemon=True)
    watcher.start()
    try:
        job = plan.job(fs.root + "/state", f"{fs.root}/{STAGING}/state", _read_confs(spark))
        report = json.loads(str(call(spark, TOOL, "copy", spark.sparkContext._jsc.sc(), job)))
    except ToolError as e:
        raise RepartitionError(f"{e} (the checkpoint is unchanged; the staging folder {fs.root}/{STAGING} "
                               "is replaced at the next run)") from None
    finally:
        done.set()
        watcher.join()
    _verify(fs, plan, report)
    fs.write(f"{STAGING}/staged", json.dumps(report).encode())
    crash_point("repartition-staged")
    return report


def _verify(fs: CheckpointFs, plan: RP.Plan, report: list[dict]) -> None:
    """Every new store committed its version as a snapshot (version 1, the state after the first
    batch, as its changelog on the empty state: a store loaded empty at version 0 writes no
    snapshot, and needs none), and every entry read was written."""
    for g in plan.groups:
        written = [r for r in report if r["operator"] == g["operator"] and r["store"] == g["store"]]
        read = sum(s["rows"] for s in written[0]["sourceRows"]) if written else -1
        if len(written) != g["newPartitions"] or sum(r["rows"] for r in written) != read:
            raise RepartitionError(f"operator {g['operator']}, store {g['store']}: {len(written)} new stores "
                                   f"wrote {sum(r['rows'] for r in written)} rows of the {read} read; the "
                                   "checkpoint is unchanged")
        for r in written:
            folder = f"{STAGING}/{_store_dir(g['operator'], int(r['partition']), g['store'])}"
            ckpt_id = r.get("ckptId", "") if plan.id_order is not None else ""
            kind = names.SNAPSHOT if plan.version > 1 else names.CHANGELOG
            committed = names.file_name(plan.version, kind, ckpt_id)
            if committed not in fs.list(folder):
                raise RepartitionError(f"{fs.root}/{folder} has no {committed}; the checkpoint is unchanged")


def _ids(fs: CheckpointFs, log: str) -> list[int]:
    return sorted(int(n) for n in fs.list(log) if n.isdigit())


def _switch(fs: CheckpointFs, batch: int, partitions: int) -> None:
    """Steps 2 and 3, from wherever an earlier run stopped (each step is done, or skipped when it
    was). The offset log entries from the last committed batch on get the new count: a query
    restarted while the checkpoint had no state folder may have planned the next batch (with the
    old count) before it failed, and Spark re-runs that batch with the count its entry pins."""
    if fs.exists(f"{STAGING}/state"):
        if fs.exists("state"):
            if fs.exists(f"{STAGING}/old-state"):  # made by a query restarted in the middle
                fs.rename("state", f"{STAGING}/restarted-{len(fs.list(STAGING))}")
            else:
                fs.rename("state", f"{STAGING}/old-state")
                crash_point("repartition-old-state-aside")
        for b in (b for b in _ids(fs, "offsets") if b >= batch):
            text = fs.read_text(f"offsets/{b}")
            fs.write(f"offsets/{b}", RP.with_partitions(text, partitions).encode(), overwrite=True)
        crash_point("repartition-offsets-switched")
        _switch_ids(fs, batch)
        fs.rename(f"{STAGING}/state", "state")
        crash_point("repartition-switched")
    fs.delete(STAGING)


def _switch_ids(fs: CheckpointFs, batch: int) -> None:
    """Checkpoint format 2: batch `batch`'s commit log entry names the new stores' ids (from the
    staged report), so that the restarted query loads exactly them. Done again on a resumed run:
    the ids are the staged ones whatever the entry holds."""
    order = json.loads(fs.read_text(f"{STAGING}/plan.json")).get("idOrder")
    if not order:
        return
    report = json.loads(fs.read_text(f"{STAGING}/staged"))
    text = fs.read_text(f"commits/{batch}")
    fs.write(f"commits/{batch}", RI.with_ids(text, RI.new_ids(report, order)).encode(), overwrite=True)
    crash_point("repartition-ids-switched")


def _resume(fs: CheckpointFs, partitions: int, dry_run: bool, out: Any) -> dict | None:
    """An earlier run's staging folder. A switch it began is finished (it must be for the same
    partition count). One it did not begin is finished too when its new state was complete and
    the checkpoint has not moved on since (no batch ran); otherwise the folder is dropped and
    the job runs again. Returns the finished run's summary, or None: plan anew."""
    if not fs.exists(STAGING):
        return None
    staged = json.loads(fs.read_text(f"{STAGING}/plan.json")) if fs.exists(f"{STAGING}/plan.json") else {}
    complete = fs.exists(f"{STAGING}/staged")
    switched = fs.exists(f"{STAGING}/old-state") and not fs.exists(f"{STAGING}/state")
    began = fs.exists(f"{STAGING}/old-state")
    if not began and complete and staged.get("to") == partitions:
        began = all(ids and ids[-1] == staged["batch"] for ids in (_ids(fs, "offsets"), _ids(fs, "commits")))
    summary = {"batch": staged.get("batch"), "from": staged.get("from"), "to": partitions, "resumed": True}
    if switched or not began:
        if not dry_run:
            fs.delete(STAGING)
        what = "finished" if switched else "had not switched anything"
        print(f"ttlstate repartition: an earlier run's staging folder {fs.root}/{STAGING} "
              f"{'would be' if dry_run else 'was'} removed (it {what})", file=out)
        return summary if switched and staged.get("to") == partitions else None
    if staged.get("to") != partitions:
        raise RepartitionError(f"an interrupted repartition of {fs.root} to {staged.get('to')} partitions "
                               "has begun switching the checkpoint over: run `ttlstate repartition "
                               f"{fs.root} --partitions {staged.get('to')}` to finish it first")
    if dry_run:
        print(f"ttlstate repartition: would finish the interrupted repartition to {partitions} partitions",
              file=out)
        return {**summary, "dryRun": True}
    _switch(fs, int(staged["batch"]), partitions)
    print(f"ttlstate repartition: finished the interrupted repartition to {partitions} partitions; restart "
          "the query", file=out)
    return summary


ASSUME_STOPPED = "--assume-stopped"


def _locked(spark: Any, fs: CheckpointFs, assume_stopped: bool) -> Any:
    """The checkpoint's lock (CheckpointLock.scala), taken for this command: refused while a query
    runs on the checkpoint, in this session or in any process whose lock the file system shows,
    and whenever the lock cannot be taken. On a file system without locks (an object store) only
    the user can say the query is stopped (`assume_stopped`). Returns the lock's class, to give
    it back."""
    for q in spark.streams.active:
        if str(q._jsq.streamingQuery().resolvedCheckpointRoot()) == fs.root:
            raise RP.Refused(f"{fs.root} is the checkpoint of the running query {q.name or q.id} of this "
                             "session: stop it first")
    lock = spark.sparkContext._jvm.ttlstate.spark.CheckpointLock
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    no_lock = lock.unlockableReason(fs.root, conf)
    if no_lock is None:
        refusal = lock.forTool(fs.root, lock.describe("ttlstate repartition"), conf)
        if refusal is not None:
            raise RP.Refused(f"{fs.root} {refusal}")
    elif not assume_stopped:
        raise RP.Refused(f"{fs.root} cannot be locked ({no_lock}), so this command cannot tell whether its "
                         f"query runs: stop the query, then run the command again with {ASSUME_STOPPED}")
    else:
        print(f"ttlstate repartition: WARNING: {fs.root} cannot be locked ({no_lock}); going on because "
              f"{ASSUME_STOPPED} says its query is stopped: do not start it until this command ends",
              file=sys.stderr)
    return lock


def repartition(spark: Any, checkpoint: str, partitions: int, dry_run: bool = False, out: Any = None,
                assume_stopped: bool = False) -> dict:
    """Repartition the stopped query of `checkpoint` to `partitions` state partitions (or say
    what it would do, `dry_run`). `assume_stopped`: the caller states the query is stopped, for a
    checkpoint on a file system without locks (refused otherwise). Returns a summary; raises
    RepartitionError."""
    out = out if out is not None else sys.stdout
    try:
        partitions = RP.check_partitions(partitions)
        fs = CheckpointFs(spark, checkpoint)
        if not fs.exists("metadata"):
            raise RP.Refused(f"{checkpoint} is not a streaming query checkpoint (no metadata file)")
        lock = _locked(spark, fs, assume_stopped)
    except (RP.Refused, ToolError) as e:
        raise RepartitionError(str(e)) from None
    try:
        return _repartition(spark, fs, partitions, dry_run, out)
    finally:
        lock.toolDone(fs.root, spark.sparkContext._jsc.hadoopConfiguration())


def _repartition(spark: Any, fs: CheckpointFs, partitions: int, dry_run: bool, out: Any) -> dict:
    try:
        resumed = _resume(fs, partitions, dry_run, out)
        if resumed is not None:
            return resumed
        ck = _checkpoint(spark, fs)
        plan = RP.plan(ck, partitions)
    except (RP.Refused, ToolError) as e:
        raise RepartitionError(str(e)) from None
    verb = "would move" if dry_run else "moving"
    rows = f"{plan.rows} rows" if plan.rows is not None else "rows not recorded"
    print(f"ttlstate repartition: {fs.root}: {verb} the state after batch {plan.batch} from "
          f"{plan.old_partitions} to {plan.new_partitions} partitions ({rows}, {plan.bytes} bytes on disk):",
          file=out)
    for line in plan.lines:
        print(f"  {line}", file=out)
    summary = {"batch": plan.batch, "version": plan.version, "from": plan.old_partitions,
               "to": plan.new_partitions, "rows": plan.rows, "bytes": plan.bytes}
    if dry_run:
        print("ttlstate repartition: dry run: nothing was changed", file=out)
        return {**summary, "dryRun": True}
    report = _stage(spark, fs, ck, plan, out)
    _switch(fs, plan.batch, plan.new_partitions)
    moved = sum(r["rows"] for r in report)
    print(f"ttlstate repartition: moved {moved} rows into {len(report)} stores; restart the query "
          f"(it runs with {plan.new_partitions} partitions from batch {plan.batch + 1} on)", file=out)
    return {**summary, "rows": moved, "stores": report}


DESCRIPTION = """\
Move a STOPPED streaming query's state to N state partitions: the query then restarts with N
partitions (spark.sql.shuffle.partitions, which Spark otherwise keeps for a checkpoint's life) and
finds every key in the partition Spark routes it to. Every entry keeps its TTL timestamp, and the
new files record the TTL settings the old ones did. Every stateful operator ttlstate serves moves,
transformWithState's column families too (each key by its grouping key; a family it does not know
is refused by name), on checkpoint format 1 and 2 (the commit log gets the new stores' ids).

It runs as a Spark job (--master, --conf): the stores are read and written on the executors. The
new state is written beside the old one, in <checkpoint>/_ttlstate_repartition/, and the
checkpoint is switched over only once all of it is written; killed at any point, the query
restarts as it was, or the command run again finishes the switch. --dry-run says what it would
move.

It refuses a checkpoint whose query runs: it takes the checkpoint's lock, which a running query
holds (local disks and HDFS). Where the file system has no locks (object stores) it cannot see a
running query and refuses unless --assume-stopped states the query is stopped."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint",
                        help="checkpoint location of the stopped query (any Hadoop file system)")
    parser.add_argument("--partitions", required=True, metavar="N",
                        help="the new number of state partitions (spark.sql.shuffle.partitions); "
                             "required, no default")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what it would move and how much; change nothing")
    parser.add_argument(ASSUME_STOPPED, action="store_true",
                        help="for a checkpoint on a file system without locks (S3, GCS, ABFS, ...), where "
                             "this command cannot see a running query: you state the query is stopped "
                             "(refused without it; never needed on a local disk or HDFS)")
    add_job_options(parser, "job")


def run_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The repartition, as `ttlstate repartition` parsed its arguments."""
    spark = job_session("ttlstate repartition", args, parser)
    try:
        repartition(spark, args.checkpoint, args.partitions, dry_run=args.dry_run,
                    assume_stopped=args.assume_stopped)
    except RepartitionError as e:
        print(f"ttlstate repartition: {e}", file=sys.stderr)
        return 1
    return 0
