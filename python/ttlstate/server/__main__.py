"""`python -m ttlstate.server`: the per-executor state server, started by the JVM shim.

A supervisor that forks `--workers` worker processes (worker_processes.py; the shim passes the
executor's cores unless `...ttlstate.workers` says otherwise; stores are sharded over the
workers, so concurrent tasks do not serialize on one interpreter), prints one line
`READY <pid>@<socket> <pid>@<socket> ...` (each worker's process id and socket; if the workers
do not start, `FAILED <reason>` instead, and it exits) and then
waits, as a bare interpreter running `supervise.py` (it execs itself into one, to drop what it
loaded for the workers to share). The sockets live under `--root` with the stores, or under
`--socket-dir` when the shim found `--root` too deep for a Unix socket path (107 bytes). It
exits, and its workers with it (their stdin is a pipe from it), when its own stdin reaches EOF
because the executor JVM is gone, or when any worker dies, so the shim restarts the whole
server and stores reload from the checkpoint. No orphan processes. A worker that stops
answering without exiting is the shim's to notice (its watchdog sees the requests waiting), and
it then kills the whole server.
A start that fails (a worker that does not come up) removes `--root` and `--socket-dir` like a
normal exit, so no directory is left behind. So does a stop signal (SIGTERM, SIGINT, SIGHUP: a
cluster manager stopping the container) at any time: while the workers start, across the exec
(held pending, see `supervise.block_stop_signals`) and in the watch; the server then ends by
that signal.

It logs one line at INFO when it has started (pid, workers, engine, memory budget; see
`store_log` for where it goes and `TTLSTATE_LOG_LEVEL`).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import traceback
from collections.abc import Callable

from ttlstate.config import keys as K
from ttlstate.engine.select import native_import_error, native_module
from ttlstate.server import store_log, supervise
from ttlstate.server.worker_processes import Worker, fork_worker, freeze_for_fork, tune_malloc


def engine_status() -> str:
    """Whether the native engine (the C++ data plane, RocksDB with the TTL compaction filter)
    loads here; without it only the portable rocksdict engine serves stores."""
    if native_module() is None:
        return (f"native engine unavailable ({native_import_error()}): stores run on rocksdict with "
                f"{K.ENGINE.suffix}=auto and fail with {K.ENGINE.suffix}=native")
    return "native engine available (C++ data plane, RocksDB TTL compaction filter)"


def describe_start(workers: list[Worker]) -> str:
    return (f"ttlstate state server started: pid {os.getpid()}, {len(workers)} worker(s) (pids "
            f"{', '.join(str(w.pid) for w in workers)}), Python {sys.version.split()[0]} at "
            f"{sys.executable}; {engine_status()}; RocksDB memory budget per worker "
            f"{K.MEMORY_MAX_BYTES.suffix} (default {K.MEMORY_MAX_BYTES.default}), set by the "
            "first store each worker opens")


def _preload() -> Callable[[str, str, Callable[[str], None]], None]:
    """Imports what a worker runs (and loads the native library) here, before the workers are
    forked, so they share it; returns the worker's serve."""
    from ttlstate.server import worker
    from ttlstate.store import provider  # noqa: F401 - a worker's first store imports these

    if native_module() is not None:  # a portable build (no library) serves rocksdict stores only
        from ttlstate.store.planes import native  # noqa: F401
    return worker.serve


def _start_workers(root: str, socket_dir: str, n: int, workers: list[Worker]) -> list[str] | None:
    """Forks `n` workers into `workers`; their READY entries (`<pid>@<socket>`) once all are
    ready, None if one failed."""
    try:
        serve = _preload()
    except Exception as e:  # noqa: BLE001 - reported as the workers' failure to start
        traceback.print_exc()
        _failed(f"the workers failed to start ({type(e).__name__}: {e})")
        return None
    if not tune_malloc():
        logging.getLogger("ttlstate.server").info(
            "glibc's mallopt is not available here: the workers keep the C library's own mmap "
            "threshold and arenas (freed memory may stay in the workers' memory)")
    freeze_for_fork()
    entries = []
    for i in range(n):
        sock = os.path.join(socket_dir, f"w{i}.sock")
        run = functools.partial(serve, sock, os.path.join(root, f"w{i}"))
        supervise.block_stop_signals()  # a stop signal must not fall between the fork and the list
        try:
            workers.append(fork_worker(run, list(workers)))
        finally:
            supervise.catch_stop_signals()
        entries.append(f"{workers[-1].pid}@{sock}")
    for i, w in enumerate(workers):
        if not w.ready_line().startswith("READY"):
            w.kill()
            _failed(f"worker {i} failed to start (exit {w.exit_code})")
            return None
    return entries


def _failed(reason: str) -> None:
    """Says why the server did not start: on stderr after the error itself, and to the shim as
    the line it reads instead of READY (`FAILED <reason>`), so its error names the cause."""
    print(f"ttlstate server: {reason}; the error is above", file=sys.stderr)
    print(f"FAILED {reason}".replace("\n", " "), flush=True)


def _stop(workers: list[Worker], dirs: list[str]) -> None:
    supervise.stopping()
    for w in workers:
        w.kill()
    supervise.remove_dirs(dirs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--root", required=True, help="private directory for sockets and stores")
    ap.add_argument("--socket-dir", help="private directory for the sockets instead of --root "
                                         "(removed on exit like --root)")
    ap.add_argument("--workers", type=int, default=0,
                    help="worker processes; the shim passes the executor's cores by default. "
                         "0 = os.cpu_count(), a fallback for running the server by hand")
    args = ap.parse_args(argv)
    if args.workers < 0:
        ap.error(f"--workers must be >= 0 (0 = one per core), not {args.workers}")
    store_log.configure_logging()
    os.umask(0o077)
    n = args.workers or os.cpu_count() or 1
    socket_dir = args.socket_dir or args.root
    dirs = [args.root, socket_dir]
    workers: list[Worker] = []
    entries = None
    try:
        supervise.catch_stop_signals()
        for d in dirs:
            os.makedirs(d, mode=0o700, exist_ok=True)
        entries = _start_workers(args.root, socket_dir, n, workers)
        if entries is not None:
            supervise.block_stop_signals()  # until the watch (this process or the exec'd one) handles them
    except supervise.Stopped:
        entries = None
    finally:
        if entries is None:  # failed, raised or signalled: nothing of this server may stay behind
            _stop(workers, dirs)
    if entries is None:
        supervise.end_by_signal()
        return 1
    print("READY " + " ".join(entries), flush=True)
    if store_log.lifecycle.isEnabledFor(logging.INFO):
        store_log.lifecycle.info(describe_start(workers))
    try:
        supervise.exec_watch([(w.pid, w.pipes) for w in workers], args.root, args.socket_dir)
    except OSError as e:
        logging.getLogger("ttlstate.server").warning(
            "ttlstate server: could not exec the supervisor's watch in a bare interpreter (%s); it "
            "watches from this process, which keeps its imports and the native library loaded", e)
    supervise.run([w.pid for w in workers], [fd for w in workers for fd in w.pipes], dirs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
