"""The server's glibc tuning: the workers' threads share one malloc arena.

Each case runs in a fresh interpreter (mallopt's arena limit only applies to arenas created
after it), where threads that each hold malloc'd memory are alive when `malloc_info` counts
the arenas. Without the tuning glibc gives the threads arenas of their own: that control is what
makes the count mean something.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")

THREADS = 6

_PROBE = textwrap.dedent(f"""
    import ctypes, ctypes.util, re, sys, tempfile, threading
    from ttlstate.server.worker_processes import tune_malloc
    if sys.argv[1] == "tune":
        assert tune_malloc()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    held, allocated, measured = [], threading.Barrier({THREADS} + 1), threading.Event()

    def allocate():
        held.extend(libc.malloc(4096) for _ in range(64))
        allocated.wait()
        measured.wait()

    threads = [threading.Thread(target=allocate) for _ in range({THREADS})]
    for t in threads:
        t.start()
    allocated.wait()
    with tempfile.NamedTemporaryFile(suffix=".xml") as f:
        fp = libc.fopen(f.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        print(len(re.findall(r'<heap nr="', open(f.name).read())))
    measured.set()
    for t in threads:
        t.join()
""")


def arenas(mode: str, env: dict[str, str] | None = None) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], env={**clean, **(env or {})},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_the_workers_threads_share_one_arena() -> None:
    assert arenas("default") > 2  # glibc's own: an arena per thread (the control)
    assert arenas("tune") == 1


def test_the_environment_wins() -> None:
    assert arenas("tune", {"MALLOC_ARENA_MAX": "2"}) == 2
