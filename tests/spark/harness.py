"""Running the same streaming query, step by step, on two providers, and comparing outputs.

A query reads a file source one JSON file per step (`maxFilesPerTrigger=1`), writes through
`foreachBatch` (commit validation on, as by default) into a dict of sorted rows per batch,
and can be stopped and restarted on its checkpoint in the middle.

A query of several sources is compared step by step instead (`outputs_per_step`): one step
writes one file per source, and Spark lists the sources one after the other, so a trigger can
see the first file and not the second. How a step's rows split into batches then depends on
timing, on either provider; what each step produces, and the state it leaves, does not.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil
from benchmarks.harness.subproc import SERVER_MARKERS
from pyspark.sql import DataFrame, SparkSession

import ttlstate
from ttlstate.config import keys as K
from ttlstate.server.worker_processes import WORKER_NAME

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
TTLSTATE = K.PROVIDER_CLASS

EVENTS_SCHEMA = "k STRING, v INT, ts TIMESTAMP"

# The test JVMs' JIT stops at C1: they live minutes on two cores, where C2's compiler threads
# take the CPU the queries need (a module of three Spark tests: 98 s with C2, 73 s with C1). It
# changes how fast the JVM runs, not what it does. Sessions of the harness launch their driver JVM
# with it; the tests' child processes (`fast_jvm_env`) and the cluster tier's JVMs get it too.
FAST_JVM = "-XX:TieredStopAtLevel=1"


def ev(k: str, v: int, second: int) -> dict:
    """One row of the events stream, at `second` past 2026-01-01 00:00."""
    return {"k": k, "v": v, "ts": f"2026-01-01 00:{second // 60:02d}:{second % 60:02d}"}


# Five batches of events with repeated keys and an out-of-order one (b at second 2).
EVENT_STEPS = [
    [ev("a", 1, 1), ev("b", 2, 2), ev("a", 3, 3)],
    [ev("a", 4, 12), ev("c", 5, 13), ev("b", 6, 2)],
    [ev("d", 7, 25), ev("a", 8, 26)],
    [ev("b", 9, 41), ev("e", 10, 42), ev("a", 11, 43)],
    [ev("f", 12, 60)],
]


# Spark-submit's own properties of the driver JVM (how it was launched: its jars are on the driver's
# class path for good, and a later context must keep giving them to its executors).
_LAUNCH_PROPERTIES = ("spark.jars", "spark.repl.local.jars", "spark.app.submitTime")


def fast_jvm_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a child process that launches its own JVM without the harness (a user's job as
    the test runs it): FAST_JVM through JDK_JAVA_OPTIONS, which only the `java` launcher reads
    (JAVA_TOOL_OPTIONS would reach javac too, and its notice would precede `javac -version`)."""
    return {**env, "JDK_JAVA_OPTIONS": f"{env.get('JDK_JAVA_OPTIONS', '')} {FAST_JVM}".strip()}


def forget_earlier_sessions() -> None:
    """Drop, from a driver JVM that is already running, the confs of the session that launched it.

    PySpark launches the driver JVM through spark-submit with the first session's confs as
    `--conf`, which become the JVM's `spark.*` system properties; every later `SparkConf()` of the
    process loads them. A test module's session would then inherit an earlier module's options
    (its `ttl="5s"`, say) whenever it does not set them itself."""
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if jvm is None:  # this session launches the JVM: its confs are its own
        return
    for key in list(jvm.System.getProperties().stringPropertyNames()):
        if key.startswith("spark.") and key not in _LAUNCH_PROPERTIES and not key.startswith("spark.submit."):
            jvm.System.clearProperty(key)


def session(master: str = "local[2]", confs: dict[str, str] | None = None,
            **ttl_options: object) -> SparkSession:
    """A test session on ttlstate (`configure(**ttl_options)`), with extra Spark `confs` and no
    other module's (`forget_earlier_sessions`)."""
    forget_earlier_sessions()
    builder = (SparkSession.builder.master(master).appName("ttlstate-tests")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.streaming.stateStore.maintenanceInterval", "1s")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", FAST_JVM))  # read when this launches the JVM
    for key, value in (confs or {}).items():
        builder = builder.config(key, value)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python UDF workers: this venv (pandas)
    spark = ttlstate.configure(builder, **ttl_options).getOrCreate()  # type: ignore[arg-type]
    spark.sparkContext.setLogLevel("ERROR")
    # A context that launched with these confs has each (lists such as spark.jars, which
    # configure() extends, contain it); a reused one ignored them all, silently.
    launched = {k: spark.sparkContext.getConf().get(k, None) for k in confs or {}}
    ignored = {k: launched[k] for k, v in (confs or {}).items() if v not in (launched[k] or "")}
    assert not ignored, f"an earlier SparkContext of this JVM was reused, its confs kept: {ignored}"
    return spark


@dataclass
class Run:
    """One query on one provider: inputs per source, a checkpoint, collected outputs."""

    spark: SparkSession
    provider: str
    build: Callable[[dict[str, DataFrame]], DataFrame]
    schemas: dict[str, str]
    output_mode: str = "append"
    confs: dict[str, str] = field(default_factory=dict)
    root: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="ttlstate-it-"))
    outputs: dict[int, list[tuple]] = field(default_factory=dict)
    progress_by_batch: dict[int, dict] = field(default_factory=dict)
    step_of_batch: dict[int, int] = field(default_factory=dict)
    step_no: int = 0

    def __post_init__(self) -> None:
        self.checkpoint = os.path.join(self.root, "ck")
        for name in self.schemas:
            os.makedirs(os.path.join(self.root, name), exist_ok=True)
        self.query = None

    def start(self, once: bool = False) -> None:
        """Starts the query; `once`: it runs one batch and stops (`Trigger.Once`), which a
        processing-time transformWithState needs to stop running batches without data."""
        self.spark.conf.set(K.PROVIDER_CLASS_KEY, self.provider)
        previous = {k: self.spark.conf.get(k, None) for k in self.confs}
        for k, v in self.confs.items():
            self.spark.conf.set(k, v)
        sources = {name: self.spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
                   .json(os.path.join(self.root, name)) for name, schema in self.schemas.items()}

        def sink(df: DataFrame, batch_id: int) -> None:
            self.outputs[batch_id] = sorted((tuple(r) for r in df.collect()), key=repr)
            self.step_of_batch[batch_id] = self.step_no - 1  # settle() holds feed() back till done

        try:
            writer = (self.build(sources).writeStream.outputMode(self.output_mode)
                      .foreachBatch(sink).option("checkpointLocation", self.checkpoint))
            self.query = (writer.trigger(once=True) if once else writer).start()
        finally:
            self._restore_confs(previous)

    def _restore_confs(self, previous: dict[str, str | None]) -> None:
        """The session's own values again, also when start() failed (unset would mean Spark's
        default; a bad value left behind would fail every later query of the module)."""
        for k, v in previous.items():
            if v is None:
                self.spark.conf.unset(k)
            else:
                self.spark.conf.set(k, v)

    def step(self, rows: dict[str, list[dict]] | list[dict]) -> None:
        """Write one file per source (a list means the only source), then process it all."""
        self.feed(rows)
        self.settle()

    def feed(self, rows: dict[str, list[dict]] | list[dict]) -> None:
        """Write one file per source; the query picks it up on its own (see `settle`)."""
        by_source = rows if isinstance(rows, dict) else {next(iter(self.schemas)): rows}
        for name, items in by_source.items():
            path = os.path.join(self.root, name, f"step-{self.step_no:04d}.json")
            hidden = os.path.join(self.root, name, f".step-{self.step_no:04d}.json.tmp")  # unseen by Spark
            with open(hidden, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in items)
            os.replace(hidden, path)
        self.step_no += 1

    def settle(self) -> None:
        """Wait until everything fed is processed and its progress reported."""
        assert self.query is not None
        self.query.processAllAvailable()
        # Progress is reported after the batch commits, so it can lag processAllAvailable().
        last = max(self.outputs, default=-1)
        query = self.query

        def reported() -> bool:
            for p in query.recentProgress:
                self.progress_by_batch[p["batchId"]] = p
            return max(self.progress_by_batch, default=-1) >= last
        poll_until(reported, 30, every_s=0.05)

    @property
    def progress(self) -> list[dict]:
        """Progress of every batch so far, in batch order (across restarts)."""
        return [self.progress_by_batch[b] for b in sorted(self.progress_by_batch)]

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None


def run_steps(spark: SparkSession, provider: str, build: Callable, schemas: dict[str, str],
              steps: list, restart_after: int | None = None, output_mode: str = "append",
              confs: dict[str, str] | None = None, pause_s: float = 0.0) -> Run:
    run = Run(spark, provider, build, schemas, output_mode, dict(confs or {}))
    run.start()
    try:
        for i, rows in enumerate(steps):
            if restart_after is not None and i == restart_after:
                run.stop()
                run.start()
            run.step(rows)
            if pause_s:
                time.sleep(pause_s)
    finally:
        run.stop()
    return run


def state_rows_per_batch(run: Run) -> list[int]:
    return [_state_rows(p) for p in run.progress]


def _state_rows(progress: dict) -> int:
    return sum(op["numRowsTotal"] for op in progress.get("stateOperators", []))


def outputs_per_step(run: Run) -> dict[int, list[tuple]]:
    """Every row each step produced, across however many batches Spark split it into."""
    out: dict[int, list[tuple]] = {}
    for batch in sorted(run.outputs):
        out.setdefault(run.step_of_batch[batch], []).extend(run.outputs[batch])
    return {step: sorted(rows, key=repr) for step, rows in out.items()}


def state_rows_per_step(run: Run) -> dict[int, int]:
    """The state rows each step left behind: those of its last batch."""
    return {run.step_of_batch[p["batchId"]]: _state_rows(p) for p in run.progress}


def batch_times(run: Run) -> dict[int, int]:
    """batchTimestampMs per batch id, from the query's offset log (what ttlstate uses as now)."""
    out = {}
    offsets = os.path.join(run.checkpoint, "offsets")
    for name in os.listdir(offsets):
        if name.isdigit():
            with open(os.path.join(offsets, name)) as f:
                f.readline()
                out[int(name)] = json.loads(f.readline())["batchTimestampMs"]
    return out


def poll_until(done: Callable[[], bool], timeout_s: float = 30.0, every_s: float = 0.2) -> bool:
    """Bounded polling, for what Spark and the server do asynchronously (maintenance, shutdown):
    True as soon as `done()` is, False if it still is not after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(every_s)
    return True


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Those of `procs` still running (exited and zombie processes are not)."""
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def is_worker(p: psutil.Process) -> bool:
    """A state server worker (forked from its supervisor: the same command line, its own name)."""
    try:
        return p.name() == WORKER_NAME
    except psutil.Error:
        return False


def is_server_command(cmd: list[str]) -> bool:
    """A state server's command line: `-m ttlstate.server` (workers, and a supervisor until it
    execs its watch), or the supervisor's `ttlstate/server/supervise.py --root ...` after."""
    joined = " ".join(cmd)
    return any(marker in joined for marker in SERVER_MARKERS)


def our_server_processes(root_pid: int | None = None) -> list[tuple[psutil.Process, list[str]]]:
    """ttlstate server processes under this test process, or under `root_pid` (not other runs
    on the machine): supervisors and their workers (`is_worker` tells them apart)."""
    found = []
    for p in psutil.Process(root_pid).children(recursive=True):
        try:
            cmd = p.cmdline()
        except psutil.Error:  # exited meanwhile, or a zombie
            continue
        if is_server_command(cmd):
            found.append((p, cmd))
    return found
