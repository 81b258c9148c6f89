"""`python -m ttlstate.server`: the per-executor state server, started by the JVM shim.

A supervisor that starts `--workers` worker processes (the shim passes the executor's cores
unless `...ttlstate.workers` says otherwise; stores are sharded over the workers, so
concurrent tasks do not serialize on one interpreter), prints one line
`READY <socket> <socket> ...` and then waits. The sockets live under `--root` with the stores,
or under `--socket-dir` when the shim found `--root` too deep for a Unix socket path (107
bytes). It exits, and its workers with it (their stdin is a pipe from here), when its own
stdin reaches EOF because the executor JVM is gone, or when any worker dies, so the shim
restarts the whole server and stores reload from the checkpoint. No orphan processes. A worker
that stops answering without exiting is the shim's to notice (its watchdog sees the requests
waiting), and it then kills the whole server. A start that fails (a worker that does not come
up) removes `--root` and `--socket-dir` like a normal exit, so no directory is left behind.

It logs one line at INFO when it has started (pid, workers, engine, memory budget; see
`store_log` for where it goes and `TTLSTATE_LOG_LEVEL`).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import threading

from ttlstate.config import keys as K
from ttlstate.engine.select import native_import_error, native_module
from ttlstate.server import store_log


def _watch_stdin(done: threading.Event) -> None:
    # The raw fd, not sys.stdin.buffer: this daemon thread may still be reading when main
    # returns, and a buffered reader's lock held at interpreter shutdown aborts the process
    # ("Fatal Python error: _enter_buffered_busy", SIGABRT) after a worker died.
    try:
        while os.read(sys.stdin.fileno(), 4096):
            pass
    finally:
        done.set()


def engine_status() -> str:
    """Whether the native engine (the C++ data plane, RocksDB with the TTL compaction filter)
    loads here; without it only the portable rocksdict engine serves stores."""
    if native_module() is None:
        return (f"native engine unavailable ({native_import_error()}): stores run on rocksdict with "
                f"{K.ENGINE.suffix}=auto and fail with {K.ENGINE.suffix}=native")
    return "native engine available (C++ data plane, RocksDB TTL compaction filter)"


def describe_start(workers: list[subprocess.Popen]) -> str:
    return (f"ttlstate state server started: pid {os.getpid()}, {len(workers)} worker(s) (pids "
            f"{', '.join(str(w.pid) for w in workers)}), Python {sys.version.split()[0]} at "
            f"{sys.executable}; {engine_status()}; RocksDB memory budget per worker "
            f"{K.MEMORY_MAX_BYTES.suffix} (default {K.MEMORY_MAX_BYTES.default}), set by the "
            "first store each worker opens")


# glibc's malloc serves an allocation of at least this many bytes with its own mapping, which
# free() hands back to the OS at once. Left alone, glibc raises the threshold to the size of
# the largest block freed so far (up to 32 MiB), after which a batch's buffers (the pending
# writes' 1 MiB arena blocks, the changelog being encoded, the sort) come from the heap of the
# thread that allocated them and stay there once freed: a worker's RSS climbed to the sum of
# its largest batches across threads (at 5M keys, about 100 MB of a worker's 130 MB). Setting
# it keeps it fixed. The environment of the executor wins if it sets it.
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MMAP_THRESHOLD_BYTES = 256 << 10


def _start_workers(root: str, socket_dir: str, n: int, workers: list[subprocess.Popen]) -> list[str] | None:
    """Starts `n` workers into `workers`; their sockets once all are ready, None if one failed."""
    env = dict(os.environ)  # a worker must not fail on a level it cannot read (warned about above)
    env.pop(store_log.LEVEL_ENV, None)
    if store_log.level_from_env() is not None:
        env[store_log.LEVEL_ENV] = store_log.level_from_env()  # type: ignore[assignment]
    env.setdefault(MMAP_THRESHOLD_ENV, str(MMAP_THRESHOLD_BYTES))
    sockets = []
    for i in range(n):
        sock = os.path.join(socket_dir, f"w{i}.sock")
        workers.append(subprocess.Popen(
            [sys.executable, "-m", "ttlstate.server.worker", "--socket", sock,
             "--root", os.path.join(root, f"w{i}")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env))
        sockets.append(sock)
    for proc in workers:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("READY"):
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            print(f"ttlstate server: worker {workers.index(proc)} failed to start (exit {code}); its "
                  "error is above", file=sys.stderr)
            return None
    return sockets


def _stop(workers: list[subprocess.Popen], dirs: list[str]) -> None:
    for p in workers:
        if p.poll() is None:
            p.kill()
    for p in workers:
        p.wait()
    for d in dict.fromkeys(dirs):
        shutil.rmtree(d, ignore_errors=True)  # sockets and local stores: a cache


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
    workers: list[subprocess.Popen] = []
    sockets = None
    try:
        for d in dirs:
            os.makedirs(d, mode=0o700, exist_ok=True)
        sockets = _start_workers(args.root, socket_dir, n, workers)
    finally:
        if sockets is None:  # failed (or raised): nothing of this server may stay behind
            _stop(workers, dirs)
    if sockets is None:
        return 1
    print("READY " + " ".join(sockets), flush=True)
    if store_log.lifecycle.isEnabledFor(logging.INFO):
        store_log.lifecycle.info(describe_start(workers))
    done = threading.Event()
    threading.Thread(target=_watch_stdin, args=(done,), daemon=True).start()
    try:
        while not done.is_set():
            if any(p.poll() is not None for p in workers):
                print("ttlstate server: a worker exited; shutting down so the shim restarts us",
                      file=sys.stderr)
                break
            done.wait(0.2)
    finally:
        _stop(workers, dirs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
