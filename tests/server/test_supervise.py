"""The supervisor's watch (`supervise.py`), on stand-in workers: child processes that, like a
worker, live until their stdin pipe reaches EOF."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from ttlstate.server import supervise


def _stand_in(exit_code: int | None = None) -> tuple[int, int]:
    """A child and the write end of its stdin pipe; it exits with `exit_code` at once if given."""
    code = f"import sys; sys.exit({exit_code})" if exit_code is not None else "import sys; sys.stdin.read()"
    r, w = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", code], stdin=r)
    os.close(r)
    return child.pid, w


def _server_dirs(tmp_path: Path) -> tuple[list[str], Path]:
    """A root with sockets-like files, a nested store and a symlink to a directory outside it
    (whose content must survive: the removal does not follow links)."""
    root = tmp_path / "srv"
    (root / "w0" / "store" / "sst").mkdir(parents=True)
    (root / "w0" / "store" / "sst" / "1.sst").write_bytes(b"x" * 100)
    (root / "w0.sock").write_text("")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    (root / "w0" / "link").symlink_to(outside, target_is_directory=True)
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    (sockets / "w1.sock").write_text("")
    return [str(root), str(sockets), str(root)], outside


def test_stdin_eof_stops_every_worker_and_removes_the_directories(tmp_path: Path) -> None:
    workers = [_stand_in(), _stand_in()]
    dirs, outside = _server_dirs(tmp_path)
    stdin_r, stdin_w = os.pipe()
    os.write(stdin_w, b"ignored input\n")  # anything but EOF keeps it watching
    os.close(stdin_w)
    started = time.monotonic()
    supervise.run([pid for pid, _ in workers], [fd for _, fd in workers], dirs, stdin_fd=stdin_r)
    assert time.monotonic() - started < 5
    for pid, fd in workers:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        with pytest.raises(OSError):
            os.fstat(fd)  # closed
    assert not any(os.path.exists(d) for d in dirs)
    assert (outside / "keep").read_text() == "kept"


def test_a_worker_that_exits_stops_the_others(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    alive, exiting = _stand_in(), _stand_in(exit_code=3)
    dirs, _ = _server_dirs(tmp_path)
    stdin_r, stdin_w = os.pipe()  # open: only the worker's exit may end the watch...
    closed: list[bool] = []
    give_up = threading.Timer(20, lambda: (closed.append(True), os.close(stdin_w)))
    give_up.start()  # ...but a broken watch fails, it does not hang
    try:
        exited = supervise.watch([alive[0], exiting[0]], stdin_fd=stdin_r)
        assert exited == exiting[0]
        assert f"worker 1 (pid {exiting[0]}) exited (3)" in capfd.readouterr().err
        supervise.stop([alive[0], exiting[0]], [alive[1], exiting[1]], dirs, reaped=exited)
    finally:
        give_up.cancel()
        give_up.join()
        if not closed:
            os.close(stdin_w)
        os.close(stdin_r)
    assert not psutil.pid_exists(alive[0])
    assert not os.path.exists(dirs[0])


def test_unknown_arguments_are_refused_by_name(capfd: pytest.CaptureFixture[str]) -> None:
    assert supervise.main(["--workers", "2"]) == 2
    assert "not '--workers'" in capfd.readouterr().err


def test_a_server_whose_workers_fail_says_why_instead_of_ready(tmp_path: Path) -> None:
    """The shim reads one line from the server: READY, or `FAILED <reason>` when it ran but its
    workers did not start (here the check before they are forked refuses an unknown fault
    point), which the shim's error then names instead of guessing that ttlstate is missing."""
    root = tmp_path / "srv"
    out = subprocess.run([sys.executable, "-m", "ttlstate.server", "--root", str(root), "--workers", "2"],
                         env={**os.environ, "TTLSTATE_FAULTS": "no-such-point"}, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    [line] = out.stdout.splitlines()
    assert line.startswith("FAILED the workers failed to start (ValueError: TTLSTATE_FAULTS: bad entry "
                           "'no-such-point'"), line
    assert "Traceback" in out.stderr and not root.exists()
