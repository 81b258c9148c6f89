"""The state server ends cleanly on what a cluster manager sends before SIGKILL.

YARN stops a container with SIGTERM to its whole process group (the executor JVM, the
supervisor and its workers at once) and SIGKILLs it 250 ms later; Kubernetes and standalone
send SIGTERM too, a terminal SIGINT or SIGHUP. Whatever the server was doing, its root and its
socket directory (under /tmp when the container's dir is too deep for a socket path) must go,
or one stale directory per killed executor stays on the node for good.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP]


def _default_dispositions() -> None:
    """A container's process starts with every signal at its default; this test process may not
    (under `nohup`, or as a background job of a script, HUP or INT are ignored, and an ignored
    signal is inherited, and kept by the server on purpose: test_sigint_ignored_by_the_parent)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


def _start(root: Path, sockets: Path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A server in a process group of its own (as a container's), with a socket dir apart from
    its root (as the shim gives one when the root is too deep); returns after its READY line."""
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.server", "--root", str(root),
                             "--socket-dir", str(sockets), "--workers", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=_default_dispositions)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    assert line.startswith("READY "), line
    workers = psutil.Process(proc.pid).children()
    assert len(workers) == 2 and root.is_dir() and sockets.is_dir()
    return proc, workers


def _wait_watching(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 10
    while "supervise.py" not in " ".join(psutil.Process(proc.pid).cmdline()):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _assert_gone(proc: subprocess.Popen, workers: list[psutil.Process], root: Path, sockets: Path) -> None:
    proc.wait(timeout=10)
    _gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers outlived the signal: {alive}"
    assert not root.exists(), f"the server's root stayed: {sorted(p.name for p in root.rglob('*'))}"
    assert not sockets.exists(), "the server's socket directory stayed"


@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_to_the_process_group_removes_root_and_socket_dir(tmp_path: Path,
                                                                   sig: signal.Signals) -> None:
    """`kill -TERM -<pgid>` (and INT, HUP) while it watches, as YARN stops a container."""
    root, sockets = tmp_path / "srv", tmp_path / "ttls-x"
    proc, workers = _start(root, sockets)
    _wait_watching(proc)
    os.killpg(proc.pid, sig)
    _assert_gone(proc, workers, root, sockets)
    assert proc.returncode == -sig  # it ends by the signal, as a process without a handler would


def test_a_signal_to_the_supervisor_alone_stops_the_workers_too(tmp_path: Path) -> None:
    root, sockets = tmp_path / "srv", tmp_path / "ttls-x"
    proc, workers = _start(root, sockets)
    _wait_watching(proc)
    os.kill(proc.pid, signal.SIGTERM)
    _assert_gone(proc, workers, root, sockets)


def test_a_signal_right_after_ready_during_the_exec_is_not_lost(tmp_path: Path) -> None:
    """SIGTERM the moment READY is printed, while the supervisor is about to exec (or execing)
    its bare watch: the signal waits, blocked, and the watch handles it."""
    for _ in range(3):
        root, sockets = tmp_path / "srv", tmp_path / "ttls-x"
        proc, workers = _start(root, sockets)
        os.killpg(proc.pid, signal.SIGTERM)
        _assert_gone(proc, workers, root, sockets)


def test_a_signal_while_the_workers_start_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM before READY (the supervisor imports and forks its workers): nothing stays."""
    root, sockets = tmp_path / "srv", tmp_path / "ttls-x"
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.server", "--root", str(root),
                             "--socket-dir", str(sockets), "--workers", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_dispositions)
    deadline = time.monotonic() + 30
    while not root.exists():  # made first thing, before the imports of what workers run
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGTERM)
    out, _err = proc.communicate(timeout=30)
    _gone, alive = psutil.wait_procs([p for p in psutil.process_iter(["cmdline"])
                                      if str(root) in " ".join(p.info["cmdline"] or [])], timeout=10)
    assert not alive
    assert not root.exists() and not sockets.exists(), out


def test_sigint_ignored_by_the_parent_stays_ignored(tmp_path: Path) -> None:
    """PySpark starts its JVM with SIGINT ignored (Ctrl-C in a shell cancels a job, it does not
    kill the driver); the state server it starts must not die of that Ctrl-C either."""
    root, sockets = tmp_path / "srv", tmp_path / "ttls-x"

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.server", "--root", str(root),
                             "--socket-dir", str(sockets), "--workers", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=ignore_sigint)
    assert proc.stdout.readline().startswith("READY ")  # type: ignore[union-attr]
    workers = psutil.Process(proc.pid).children()
    _wait_watching(proc)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.5)
    assert proc.poll() is None and all(w.is_running() for w in workers) and root.is_dir()
    os.killpg(proc.pid, signal.SIGTERM)
    _assert_gone(proc, workers, root, sockets)
