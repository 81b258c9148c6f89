"""The supervisor's worker processes, forked from it once it has imported everything a worker
runs (the interpreter's modules, the native library).

Forked, not started afresh, because of memory: what the supervisor loaded before the fork (the
native library's relocated pages, the imported modules' objects, frozen out of the garbage
collector's reach) stays shared by every worker instead of being built again in each. With two
workers the idle server went from about 56 MB (PSS, three interpreters) to about 25 MB.

A worker's stdin is a pipe whose only writer is the supervisor: EOF means the supervisor is
gone, and the worker goes too (no orphans). Its stdout is the supervisor's stderr, so nothing
it prints reaches the shim, which reads the supervisor's READY line from stdout. It reports
ready on a pipe of its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from ttlstate.server import supervise

# glibc's malloc serves an allocation of at least this many bytes with its own mapping, which
# free() hands back to the OS at once. Left alone, glibc raises the threshold to the size of
# the largest block freed so far (up to 32 MiB), after which a batch's buffers (the pending
# writes' 1 MiB arena blocks, the changelog being encoded, the sort) come from the heap of the
# thread that allocated them and stay there once freed: a worker's RSS climbed to the sum of
# its largest batches across threads (at 5M keys, about 100 MB of a worker's 130 MB). Setting
# it keeps it fixed. The environment of the executor wins if it sets it.
MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
MMAP_THRESHOLD_BYTES = 256 << 10
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
# One malloc arena per worker, shared by its threads. glibc gives each new thread its own arena
# (up to 8 per core), and memory freed into an arena is reused only by the threads attached to
# it: with state larger than the block cache, a lookup thread allocates each block it reads
# into its arena while the cache frees the evicted ones into the arenas of whichever threads
# read them, so every arena grows by what the others free, until the next trim. At 50M keys
# with `memory.maxBytes=128m` the server peaked at 725 MB PSS with glibc's default and at
# 373 MB with one arena, batches 0.88x (same run). The price is one allocation lock for the
# worker's threads: the large, cold benchmark ran 3-5% slower, growth batches 0.97-1.14x.
# The environment undoes it.
ARENA_MAX_ENV = "MALLOC_ARENA_MAX"
ARENA_MAX = 1
_M_ARENA_MAX = -8  # glibc's mallopt parameter


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None)


def tune_malloc() -> bool:
    """Fixes glibc's mmap threshold and its number of arenas for this process (and the workers
    forked from it), each unless the environment set it; False where there is no glibc mallopt
    (its defaults then apply)."""
    return all(_mallopt(env, param, value) for env, param, value in (
        (MMAP_THRESHOLD_ENV, _M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        (ARENA_MAX_ENV, _M_ARENA_MAX, ARENA_MAX)))


def _mallopt(env: str, param: int, value: int) -> bool:
    if os.environ.get(env):
        return True  # glibc read it at start
    try:
        return bool(_libc().mallopt(param, value))
    except (OSError, AttributeError):
        return False


# The worker's process name (`ps -o comm`, psutil's name()): its command line is the
# supervisor's, so this is how tools and tests tell the two apart. At most 15 bytes.
WORKER_NAME = "ttlstate-worker"
_PR_SET_NAME = 15


def _set_name(name: str) -> None:
    try:
        _libc().prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: only the name shown by ps differs


def _native_threads() -> int:
    """This process's threads as the kernel counts them (a native library's too); 1 where
    /proc is missing."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


@dataclass
class Worker:
    pid: int
    _life: int  # the write end of the worker's stdin: closing it (or dying) ends the worker
    _ready: int  # the read end of its ready pipe
    exit_code: int | None = None

    def poll(self) -> int | None:
        """The exit status once it exited (a signal as its negative), else None."""
        if self.exit_code is None:
            self.exit_code = supervise.exit_code(self.pid)
        return self.exit_code

    @property
    def pipes(self) -> list[int]:
        """The supervisor's ends of the pipes to it."""
        return [self._life, self._ready]

    def ready_line(self) -> str:
        """What the worker wrote on its ready pipe, up to the first newline ('' if it exited
        first)."""
        data = b""
        while not data.endswith(b"\n"):
            chunk = os.read(self._ready, 4096)
            if not chunk:
                break
            data += chunk
        return data.decode(errors="replace").strip()

    def kill(self) -> None:
        if self.poll() is None:
            self.exit_code = supervise.kill(self.pid)
        supervise.close_all(self.pipes)


def fork_worker(run: Callable[[Callable[[str], None]], None], siblings: list[Worker]) -> Worker:
    """Forks a worker running `run(ready)`; `ready(line)` reports it up. The caller must have no
    other thread: a fork copies only the calling one, and any lock another held stays locked."""
    if threading.active_count() > 1 or _native_threads() > 1:
        raise RuntimeError("ttlstate server: workers are forked before any other thread starts")
    life_r, life_w = os.pipe()
    ready_r, ready_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(life_r)
        os.close(ready_w)
        return Worker(pid, life_w, ready_r)
    code = 1
    try:
        os.close(life_w)
        os.close(ready_r)
        for s in siblings:  # their pipes' ends: a sibling must see EOF when the supervisor goes
            supervise.close_all(s.pipes)
        os.dup2(life_r, 0)
        os.close(life_r)
        os.dup2(2, 1)
        supervise.default_stop_signals()
        _set_name(WORKER_NAME)

        def ready(line: str) -> None:
            os.write(ready_w, (line + "\n").encode())

        run(ready)
        code = 0
    except BaseException:  # noqa: BLE001 - a worker reports and exits; it never returns to the supervisor's code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def freeze_for_fork() -> None:
    """Moves every object allocated so far out of the garbage collector's generations: a
    collection in a worker then never writes to (and so copies) the pages they share."""
    gc.collect()
    gc.freeze()
