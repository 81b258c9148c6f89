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
waiting), and it then kills the whole server.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading


def _watch_stdin(done: threading.Event) -> None:
    # The raw fd, not sys.stdin.buffer: this daemon thread may still be reading when main
    # returns, and a buffered reader's lock held at interpreter shutdown aborts the process
    # ("Fatal Python error: _enter_buffered_busy", SIGABRT) after a worker died.
    try:
        while os.read(sys.stdin.fileno(), 4096):
            pass
    finally:
        done.set()


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
    os.umask(0o077)
    os.makedirs(args.root, mode=0o700, exist_ok=True)
    socket_dir = args.socket_dir or args.root
    os.makedirs(socket_dir, mode=0o700, exist_ok=True)
    n = args.workers or os.cpu_count() or 1
    workers = []
    sockets = []
    for i in range(n):
        sock = os.path.join(socket_dir, f"w{i}.sock")
        proc = subprocess.Popen(
            [sys.executable, "-m", "ttlstate.server.worker", "--socket", sock,
             "--root", os.path.join(args.root, f"w{i}")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        workers.append(proc)
        sockets.append(sock)
    for proc in workers:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("READY"):
            for p in workers:
                p.kill()
            print(f"ttlstate server: a worker failed to start (exit {proc.poll()})", file=sys.stderr)
            return 1
    print("READY " + " ".join(sockets), flush=True)
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
        for p in workers:
            if p.poll() is None:
                p.kill()
        for p in workers:
            p.wait()
        for d in {args.root, socket_dir}:
            shutil.rmtree(d, ignore_errors=True)  # sockets and local stores: a cache
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
