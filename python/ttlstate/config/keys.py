"""Every conf key of ttlstate, defined once: with its default, doc, kind and bounds (conf_key.py).

Only SQL confs that start with `spark.sql.streaming.stateStore.` reach a provider on the
executors, so all keys live under `spark.sql.streaming.stateStore.ttlstate.`. The Scala
shim's `ConfKeys` is generated from these (ttlstate.codegen; `tests/unit/test_cross_language.py`
checks the compiled shim's list), and `tests/unit/test_docs.py` checks the generated
configuration reference (`docs/configuration.md`) is up to date.
"""

from __future__ import annotations

from enum import Enum

from ttlstate.config.conf_key import OFF_WORDS, PREFIX, ConfKey, Kind
from ttlstate.config.parse import INT64_MAX

PROVIDER_CLASS_KEY = "spark.sql.streaming.stateStore.providerClass"
PROVIDER_CLASS = "ttlstate.spark.TtlStateStoreProvider"


class UpdateType(Enum):
    ON_CREATE_AND_WRITE = "OnCreateAndWrite"
    ON_READ_AND_WRITE = "OnReadAndWrite"


class StateVisibility(Enum):
    NEVER_RETURN_EXPIRED = "NeverReturnExpired"
    RETURN_EXPIRED_IF_NOT_CLEANED_UP = "ReturnExpiredIfNotCleanedUp"


class TimeSource(Enum):
    BATCH_TIMESTAMP = "batchTimestamp"
    WATERMARK = "watermark"
    ACTIVE_TIME = "activeTime"
    WALL_CLOCK = "wallClock"


class EngineKind(Enum):
    NATIVE = "native"
    ROCKSDICT = "rocksdict"
    AUTO = "auto"


class SnapshotLayout(Enum):
    SST = "sst"
    RECORDS = "records"


class TransformWithStateStore(Enum):
    ROCKSDB = "rocksdb"
    TTLSTATE = "ttlstate"


__all__ = ["OFF_WORDS", "PREFIX", "ConfKey", "Kind"]  # with the keys below

# Keys are written ConfKey(suffix, default, doc, kind, option=..., bounds...): see conf_key.py.
TTL = ConfKey("ttl", "off", "Time to live of a state entry since its last access (per UpdateType). "
              "`off` disables TTL.",
              Kind.DURATION, option="ttl", off=True,
              examples=("500ms", "10s", "30m", "1.5h", "2d", "'10 minutes'", "'interval 1 hour'"))
UPDATE_TYPE = ConfKey("updateType", UpdateType.ON_CREATE_AND_WRITE.value,
                      "Which accesses refresh an entry's timestamp (Flink's UpdateType).",
                      Kind.ENUM, option="update_type", choices=UpdateType)
STATE_VISIBILITY = ConfKey("stateVisibility", StateVisibility.NEVER_RETURN_EXPIRED.value,
                           "Whether an expired entry that is still stored may be returned once "
                           "(Flink's StateVisibility).",
                           Kind.ENUM, option="state_visibility", choices=StateVisibility)
TIME_SOURCE = ConfKey("timeSource", TimeSource.BATCH_TIMESTAMP.value,
                      "The clock TTL counts (docs/clocks.md). `batchTimestamp`: the micro-batch's "
                      "timestamp from the offset log (processing time; an outage counts in full). "
                      "`watermark`: the batch's event-time watermark from the offset log (event "
                      "time: outage- and replay-proof; needs a watermark in the query). `activeTime`: "
                      "processing time that runs only while the query runs: a gap between two "
                      "batches counts at most `clock.maxGap`. `wallClock`: the executor's clock "
                      "(not deterministic).",
                      Kind.ENUM, option="time_source", choices=TimeSource)
# Below a second it would stop the clock between ordinary batches.
CLOCK_MAX_GAP = ConfKey("clock.maxGap", "10m",
                        "`activeTime` only: the most a gap between two consecutive batches adds to "
                        "the clock, so an outage (or an idle stream) counts at most this much. Keep "
                        "it above the trigger interval plus a batch's duration.",
                        Kind.DURATION, option="clock_max_gap", minimum=1000, examples=("5m", "10m", "1h"))
READER_INCLUDE_EXPIRED = ConfKey("reader.includeExpired", "false",
                                 "The state data source (`spark.read.format(\"statestore\")`) "
                                 "returns a batch's entries as the query saw them: with the TTL "
                                 "the checkpoint recorded, at that batch's time. `true` returns "
                                 "the entries expired then too (those not yet removed).",
                                 Kind.BOOL, option="reader_include_expired")
FULL_SNAPSHOT = ConfKey("cleanup.fullSnapshot", "true",
                        "Write record snapshots without the entries expired at the snapshot's "
                        "batch time. SST snapshots (`snapshot.layout=sst`) are the local DB's "
                        "files as they are, as Flink's full-snapshot cleanup does not apply to "
                        "incremental checkpoints: there the compaction filter removes them.",
                        Kind.BOOL, option="full_snapshot")
INCREMENTAL_SIZE = ConfKey("cleanup.incremental.size", "1000",
                           "Entries the incremental cleanup cursor checks per trigger; expired "
                           "ones are deleted. On by default: the compaction filter never sees "
                           "entries still in the memtable.",
                           Kind.INT, option="incremental_size", minimum=0, maximum=INT64_MAX, zero="off")
INCREMENTAL_PER_RECORD = ConfKey("cleanup.incremental.perRecord", "false",
                                 "Trigger incremental cleanup on every state access; otherwise "
                                 "once per batch, at commit.",
                                 Kind.BOOL, option="incremental_per_record")
FILTER_ENABLED = ConfKey("cleanup.compactionFilter.enabled", "true",
                         "Let RocksDB compaction drop expired entries (native engine only).",
                         Kind.BOOL, option="compaction_filter")
FILTER_QUERY_TIME_AFTER = ConfKey("cleanup.compactionFilter.queryTimeAfterNumEntries", "1000",
                                  "The filter re-reads the clock after this many entries "
                                  "(Flink's queryTimeAfterNumEntries).",
                                  Kind.INT, option="query_time_after_num_entries", minimum=0,
                                  maximum=INT64_MAX)
FILTER_PERIODIC_COMPACTION = ConfKey("cleanup.compactionFilter.periodicCompaction", "30d",
                                     "RocksDB periodic_compaction_seconds, so cold files reach "
                                     "the filter too.",
                                     Kind.DURATION, option="periodic_compaction", minimum=0, zero="off",
                                     examples=("7d", "12h"))
FILTER_COMPACT_EVERY = ConfKey("cleanup.compactionFilter.compactEvery", "0",
                               "Compact the whole local DB every this many commits, so the filter "
                               "also reaches entries still in the memtable (small states).",
                               Kind.INT, option="compact_every", minimum=0, maximum=INT64_MAX,
                               zero="only RocksDB's own compactions")
ENGINE = ConfKey("engine", EngineKind.NATIVE.value,
                 "Storage engine. `native` has the compaction filter; `rocksdict` is the "
                 "portable fallback; `auto` prefers native and falls back with a warning.",
                 Kind.ENUM, option="engine", choices=EngineKind)
SNAPSHOT_INTERVAL = ConfKey("snapshotInterval", "10",
                            "Write a full snapshot every this many versions (changelogs between).",
                            Kind.INT, option="snapshot_interval", minimum=1, maximum=INT64_MAX)
SNAPSHOT_LAYOUT = ConfKey("snapshot.layout", SnapshotLayout.SST.value,
                          "What a snapshot is. `sst`: the local RocksDB's SST files, each uploaded "
                          "once and shared by later snapshots, so a snapshot costs the change since "
                          "the last one and a restore copies files instead of rebuilding them "
                          "(native engine). `records`: one engine-neutral file with the whole "
                          "state, rewritten at every snapshot, which `cleanup.fullSnapshot` "
                          "applies to (what the rocksdict engine always writes). Both read both.",
                          Kind.ENUM, option="snapshot_layout", choices=SnapshotLayout)
SNAPSHOT_READ_IN_PLACE = ConfKey("snapshot.readInPlace", "false",
                                  "A restore from an SST snapshot (`snapshot.layout=sst`) opens the "
                                  "local DB on the snapshot's SST files where they lie in the "
                                  "checkpoint instead of copying them first, so its time does not "
                                  "grow with the state: RocksDB reads the blocks it needs from them "
                                  "(checking each block's checksum), new writes stay local until "
                                  "uploaded, and the checkpoint's files are never modified or "
                                  "deleted through the local DB. On `file:` (with "
                                  "`checkpoint.localFiles`) the state server reads the files "
                                  "itself; elsewhere (HDFS, S3A, ...) the shim's range service "
                                  "reads the byte ranges RocksDB asks for through Hadoop, and "
                                  "the block cache is what is kept locally of them. A damaged "
                                  "file (RocksDB's block checksums, the file system's own, or "
                                  "the whole file's checksum: read in the background on `file:`, "
                                  "and elsewhere by a task's retry of the restored version) "
                                  "fails the load after it, which repairs as "
                                  "`repair.maxChangelogReplay` says. An unreachable file system "
                                  "fails the task naming the file; its retry reads again.",
                                  Kind.BOOL, option="snapshot_read_in_place")
SNAPSHOT_LOCAL_MAX_BYTES = ConfKey("snapshot.localMaxBytes", "0",
                                    "With `snapshot.readInPlace`: the most bytes of SST files one "
                                    "store keeps on the executor's local disk, so a store may be "
                                    "larger than the disk. Files a restore opened in place take "
                                    "none; the files the local DB writes (flushes, compactions) stay "
                                    "local until a snapshot uploaded them, and after each snapshot, "
                                    "while the store's local files exceed this, the oldest uploaded "
                                    "ones (RocksDB's older files lie in its deeper levels, read for "
                                    "keys the newer ones lack) are read in place from the "
                                    "checkpoint from then on and their local blocks freed. Progress "
                                    "shows the local disk's share of the SST reads "
                                    "(`inPlaceLocalReads` against `inPlaceRangeReads`).",
                                    Kind.SIZE, option="snapshot_local_max_bytes", minimum=0,
                                    zero="unbounded: uploaded files stay local", examples=("1g", "512m"))
SNAPSHOT_LOCAL_FILL = ConfKey("snapshot.localFill", "true",
                               "With `snapshot.readInPlace`, where the shim reads the checkpoint "
                               "(HDFS, S3A, ...): after a restore opened a store in place, a "
                               "background thread of the state server copies the files it reads "
                               "in place to the local disk, one file at a time in each worker, the "
                               "newest first, while the store's local SST files stay within "
                               "`snapshot.localMaxBytes`. Each copy is checked whole against its "
                               "snapshot's checksum, and RocksDB reads it (also through the readers "
                               "it holds open) from then on: the restore stays as quick as reading "
                               "in place, and the batches after it read the local disk again "
                               "instead of one range of the checkpoint per block. A copy found "
                               "damaged stays read in place and the next load passes over every "
                               "snapshot naming it. Off: the files are read in place until "
                               "compactions rewrite them. Progress counts the files "
                               "(`localSstFilesFilled`).",
                               Kind.BOOL, option="snapshot_local_fill")
SNAPSHOT_AFTER_COMMIT = ConfKey("snapshot.afterCommit", "false",
                                 "Start a snapshot that is due (`snapshotInterval`) as soon as the "
                                 "commit that makes it due returns, on a background thread of the "
                                 "state server, instead of at Spark's next maintenance "
                                 "(`spark.sql.streaming.stateStore.maintenanceInterval`, 60 s by "
                                 "default), so a restore replays only the changelogs committed "
                                 "since. With `snapshotInterval=1` and SST snapshots every version "
                                 "is snapshotted, as Spark's RocksDB provider uploads one with every "
                                 "commit, but off the commit's path: each costs the memtable's "
                                 "flush (the store held) and the upload of the SST files written "
                                 "since the last. On a checkpoint the state server does not write "
                                 "itself (HDFS, S3A, ...), the background thread reaches it through "
                                 "the shim's range service, as reads in place do. A snapshot still "
                                 "running when the next one is due "
                                 "is followed by one of the then newest version. A failed one is "
                                 "logged (WARN) and tried again at the next due commit or "
                                 "maintenance.",
                                 Kind.BOOL, option="snapshot_after_commit")
# Spark's own bound on the same repair (autoSnapshotRepair.maxChangeFileReplay) is 500 since 4.2.
REPAIR_MAX_REPLAY = ConfKey("repair.maxChangelogReplay", "500",
                            "A snapshot that is damaged or missing (its file, an SST manifest or an "
                            "SST file it names) is passed over with a WARN, and the version is rebuilt "
                            "from the newest intact older snapshot (or the empty state) and the "
                            "changelogs since, as Spark's own providers repair since 4.2 "
                            "(`numSnapshotsAutoRepaired`). A repair replays at most this many "
                            "changelogs; past it the load fails naming the damaged file and this key.",
                            Kind.INT, option="repair_max_changelog_replay", minimum=0, maximum=INT64_MAX,
                            zero="no repair: a damaged snapshot fails the load, naming it")
CHECKPOINT_LOCAL_FILES = ConfKey("checkpoint.localFiles", "true",
                                 "Where the checkpoint location is on Hadoop's local file system "
                                 "(`file:`, a local disk or a mounted NFS or FUSE share), the state "
                                 "server reads and writes its files there itself (atomically: a "
                                 "temporary file, fsync, rename) instead of through the executor's "
                                 "Hadoop FileSystem, which costs tens of milliseconds per file "
                                 "there. `false`: always through Hadoop. Other file systems, and "
                                 "a custom `spark.sql.streaming.checkpointFileManagerClass`, "
                                 "always go through Hadoop.",
                                 Kind.BOOL, option="checkpoint_local_files")
_INTERPRETER = " to a Python interpreter with ttlstate installed"
PYTHON = ConfKey("python", "",
                 "Interpreter of the state server, needed only where PySpark's own setting is "
                 "not the one: by default the executors' Python as PySpark picks it, "
                 "`spark.pyspark.python` (a relative `./environment/bin/python` of an "
                 "`--archives` venv is resolved in the container), else PYSPARK_PYTHON "
                 "(`configure` passes the driver's, which PySpark gives the executors' Python "
                 "workers; otherwise the executor's), then in local mode the driver's interpreter "
                 "(`localModePython`), then python3. Read when an executor starts its server "
                 "(first use), so a later query in the same JVM with another value uses the "
                 "running server.",
                 Kind.PATH, option="python", note=_INTERPRETER)
LOCAL_MODE_PYTHON = ConfKey("localModePython", "",
                            "The driver's interpreter: the state server's in local mode only (the "
                            "executor is the driver's JVM) when neither `python`, "
                            "`spark.pyspark.python` nor PYSPARK_PYTHON is set, and the one the "
                            "checks at query start validate the confs with (after "
                            "`spark.pyspark.driver.python` and PYSPARK_DRIVER_PYTHON). `configure` "
                            "sets it to `sys.executable`; executors of a cluster never use it.",
                            Kind.PATH, option="local_mode_python", note=_INTERPRETER)
WORKERS = ConfKey("workers", "0",
                  "Worker processes of the state server; stores are sharded over them. 0: the "
                  "executor's cores (local mode: its threads; otherwise the cores it was launched "
                  "with, else `spark.executor.cores`, else the processors the JVM sees). Each "
                  "worker is a process forked from the server's supervisor, sharing what it loaded "
                  "(interpreter, native library): about 9 MB (PSS) when idle, plus up to "
                  "`memory.maxBytes` of RocksDB.",
                  Kind.INT, option="workers", minimum=0, maximum=1024, zero="one per executor core")
WRITE_BATCH_SIZE = ConfKey("writeBatchBytes", "262144",
                           "Bytes of pipelined puts/removes the shim buffers before sending.",
                           Kind.INT, option="write_batch_bytes", minimum=1024, maximum=1 << 30)
KEY_FILTER_MAX_KEYS = ConfKey("keyFilter.maxKeys", "10000000",
                              "Stores with at most this many keys keep a Bloom filter of their keys "
                              "in the executor JVM, so a read of a key the store does not have, such "
                              "as every new key of a deduplication, needs no round trip to the state "
                              "server. It grows with the store up to this many keys (3 to 8 bytes per "
                              "key), within the executor's keyFilter.maxBytes.",
                              Kind.INT, option="key_filter_max_keys", minimum=0, maximum=1 << 26, zero="off")
KEY_FILTER_MAX_BYTES = ConfKey("keyFilter.maxBytes", "128m",
                               "Heap of the executor JVM all stores' key filters may take together. A "
                               "filter that would pass it gives up (its store's reads of absent keys "
                               "reach the state server again, with a warning in the executor log).",
                               Kind.SIZE, option="key_filter_max_bytes", zero="off", examples=("128m", "1g"))
READ_AHEAD_CHUNK_ROWS = ConfKey("readAhead.chunkRows", "1024",
                                "Spark reads state one input row at a time, and a key neither the "
                                "executor's cache nor the key filter answers costs a round trip to "
                                "the state server. A deduplication (`dropDuplicates`) and the restore "
                                "step of an aggregation instead read this many input rows ahead and "
                                "fetch the state of their keys in one round trip. Needs "
                                "`spark.sql.extensions` (which `configure` sets); read when a query "
                                "plans its batches.",
                                Kind.INT, option="read_ahead_chunk_rows", minimum=0, maximum=1 << 20,
                                zero="off")
MEMORY_MAX_BYTES = ConfKey("memory.maxBytes", "256m",
                           "Memory of RocksDB per state server worker process (native engine): one "
                           "block cache shared by all of the worker's stores, which memtables are "
                           "charged to as well (RocksDB's WriteBufferManager), as Spark's "
                           "`boundedMemoryUsage`. The executor's total is this times the workers. "
                           "Read when a worker opens its first store.",
                           Kind.SIZE, option="memory_max_bytes", minimum=16 << 20, examples=("256m", "1g"))
MEMORY_WRITE_BUFFER_RATIO = ConfKey("memory.writeBufferRatio", "0.5",
                                    "Share of `memory.maxBytes` that memtables (writes not yet "
                                    "flushed) may use; past it RocksDB flushes the largest.",
                                    Kind.NUMBER, option="memory_write_buffer_ratio", minimum=0, maximum=1,
                                    exclusive=True, examples=("0.5",))
CACHE_MAX_BYTES = ConfKey("cache.maxBytes", "64m",
                          "The executor's cross-batch cache of recently used state entries in the JVM, "
                          "shared by all stores of the executor, the oldest evicted first unless in use "
                          "(entries and index together stay within this many bytes of heap): a "
                          "read of a hot key needs no round trip to the state server. Exact under TTL "
                          "(it applies Flink's expiry rule itself); off for stores whose reads must "
                          "all reach the server (ReturnExpiredIfNotCleanedUp, per-record incremental "
                          "cleanup).",
                          Kind.SIZE, option="cache_max_bytes", zero="off", examples=("64m", "1g"))
# Below a second, a healthy server on a loaded machine could be taken for a hung one.
REQUEST_TIMEOUT = ConfKey("requestTimeout", "5m",
                          "How long the shim waits for the state server with no sign of progress "
                          "before it gives up: no answer, no checkpoint callback, and a worker "
                          "process that uses no CPU (or is stopped). The server is then killed and "
                          "the task fails naming it; Spark's retry starts a new server. A slow but "
                          "working server (e.g. a long snapshot) is waited for.",
                          Kind.DURATION, option="request_timeout", minimum=1000, examples=("30s", "5m", "1h"))
REAL_TIME_CLOCK_INTERVAL = ConfKey(
    "realTime.clockInterval", "off",
    "Real-time Mode (`trigger(realTime=...)`): how often TTL's now advances inside one long "
    "batch, to the executor's wall clock (never below the batch timestamp, never backwards). "
    "`off`: now stays at the batch timestamp for the whole batch, i.e. the checkpoint interval "
    "(replay-deterministic, the micro-batch behaviour). See [Real-time Mode](real-time-mode.md).",
    Kind.DURATION, option="real_time_clock_interval", off=True, minimum=10, examples=("100ms", "1s", "10s"))
TRANSFORM_WITH_STATE = ConfKey(
    "transformWithState", TransformWithStateStore.ROCKSDB.value,
    "Where a transformWithState query (Spark 4.0 and later) keeps its state. `rocksdb`: Spark's "
    "RocksDB provider, the whole query: the extension routes it there, with one INFO line at its "
    "start. `ttlstate`: ttlstate's own store, its column families key prefixes there (opt-in; not "
    "yet: the change feed of a ListState). Its state variables expire by their `TTLConfig` either "
    "way; ttlstate's TTL does not apply to them. Read when the query starts: a checkpoint keeps "
    "the provider it was started with. See [transformWithState](transform-with-state.md).",
    Kind.ENUM, option="transform_with_state", choices=TransformWithStateStore)
# A pattern key's default is what the docs show for it: the key is unset unless given.
OPERATOR_TTL = ConfKey("operator.<operatorId>.ttl", "(the global ttl)",
                       "TTL for one stateful operator, by operator id: the number of its "
                       "`<checkpoint>/state/<operatorId>` directory, listed with its name by "
                       "`ttlstate inspect`. Overrides `operator.<operatorName>.ttl` and `ttl`.",
                       Kind.DURATION, option="operator_ttl", off=True, examples=("10m", "1h"))

# The names Spark 4.3's stateful operators report (`operatorName` in progress, and the state
# metadata of the checkpoint), for those that run on a custom state store provider.
OPERATOR_NAMES: tuple[str, ...] = (
    "stateStoreSave", "StatefulStreamlineAggregate", "dedupe", "dedupeWithinWatermark",
    "sessionWindowStateStoreSaveExec", "flatMapGroupsWithState", "applyInPandasWithState",
    "symmetricHashJoin", "globalLimit",
)
OPERATOR_NAME_TTL = ConfKey("operator.<operatorName>.ttl", "(the global ttl)",
                            "TTL for the stateful operators of this name, as progress reports it "
                            "(`operatorName`), e.g. `operator.dedupe.ttl`. A store finds its operator's "
                            "name in the checkpoint's state metadata when it opens, which Spark writes "
                            "since 4.0: on Spark 3.5 `configure()` and the start checks refuse the key "
                            "before the query starts (use `operator.<operatorId>.ttl` there). A name "
                            "that several operators of one query have fails the query (use their ids). "
                            "Overrides `ttl`.",
                            Kind.DURATION, option="operator_ttl", off=True, examples=("10m", "1h"),
                            note="; the name one of " + ", ".join(OPERATOR_NAMES))

ALL_KEYS: tuple[ConfKey, ...] = (
    TTL, UPDATE_TYPE, STATE_VISIBILITY, TIME_SOURCE, CLOCK_MAX_GAP, READER_INCLUDE_EXPIRED,
    FULL_SNAPSHOT, INCREMENTAL_SIZE,
    INCREMENTAL_PER_RECORD, FILTER_ENABLED, FILTER_QUERY_TIME_AFTER,
    FILTER_PERIODIC_COMPACTION, FILTER_COMPACT_EVERY, ENGINE, SNAPSHOT_INTERVAL, SNAPSHOT_LAYOUT,
    SNAPSHOT_READ_IN_PLACE, SNAPSHOT_LOCAL_MAX_BYTES, SNAPSHOT_LOCAL_FILL, SNAPSHOT_AFTER_COMMIT,
    REPAIR_MAX_REPLAY,
    CHECKPOINT_LOCAL_FILES, PYTHON,
    LOCAL_MODE_PYTHON, WORKERS, WRITE_BATCH_SIZE, KEY_FILTER_MAX_KEYS, KEY_FILTER_MAX_BYTES,
    READ_AHEAD_CHUNK_ROWS, MEMORY_MAX_BYTES, MEMORY_WRITE_BUFFER_RATIO, CACHE_MAX_BYTES, REQUEST_TIMEOUT,
    OPERATOR_TTL, OPERATOR_NAME_TTL, REAL_TIME_CLOCK_INTERVAL, TRANSFORM_WITH_STATE,
)


def operator_ttl_key(operator: int | str) -> str:
    """The TTL key of one operator, by id (an int) or by name (`dedupe`)."""
    return f"{PREFIX}operator.{operator}.ttl"
