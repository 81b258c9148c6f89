"""One store on a state server of its own, for the benchmarks that talk to the server directly
(`bridge_ops`, `read_ahead_lookups`) rather than through Spark."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ttlstate.config import keys as K
from ttlstate.server.client import Client


@contextmanager
def bench_store(env: dict[str, str] | None = None) -> Iterator[tuple[Client, int, int]]:
    """A store "bench" with TTL 1h on a one-worker server in a temporary root (`env`: the
    server's environment, e.g. an older checkout's): (client, store handle, the worker's pid).
    The server stops when the block ends."""
    root = tempfile.mkdtemp(prefix="ttlstate-bench-store-")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ttlstate.server", "--root", f"{root}/srv", "--workers", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        # "READY <worker pid>@<socket path>" (server/__main__.py)
        worker, sock = proc.stdout.readline().split()[1].split("@", 1)  # type: ignore[union-attr]
        c = Client(sock)
        c.hello()
        h = c.open("bench", {K.TTL.key: "1h"}, {"operatorId": 0, "storeName": "default"}, f"{root}/ck")
        yield c, h, int(worker)
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
