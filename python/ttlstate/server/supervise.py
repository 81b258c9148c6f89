"""The supervisor's watch over its running workers: it ends them and removes the server's
directories when the executor JVM goes (EOF on its stdin), when any worker exits, or on a stop
signal (SIGTERM, SIGINT, SIGHUP: what YARN, Kubernetes and standalone workers send a container's
process group before SIGKILL, which no process can clean up after).

Standard library only, and not even `shutil` (whose archive support loads three compression
libraries), because once its workers are up the supervisor execs this file in a bare
interpreter (`python -I -S supervise.py ...`, `exec_watch`). Before that it had imported
everything a worker runs and loaded the native library, so that the forked workers share
them; it then kept all of it, and the pages of those libraries that only it had touched, for
nothing. Measured idle with two workers: the supervisor's PSS 20 MB before (14 MB of it its
own), 5 MB after. The process id stays the same, so the shim, which knows the supervisor by
it, sees no difference; the workers stay its children, and the pipes to them (whose EOF ends
a worker) pass to the new program by file descriptor.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # `signal`'s C module: built in, loaded at start (no stub)
import os
import select
import sys

POLL_S = 0.2
# Not `signal.SIGKILL`, nor `typing` for annotations: those modules import enum, re and
# collections, 2 MB more of the bare interpreter. SIGKILL is 9 wherever Python can fork.
_SIGKILL = 9
# What a cluster manager (or a terminal) sends to stop a process before it SIGKILLs it.
STOP_SIGNALS = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
_stopping = False  # the server's directories are being removed: a signal must not interrupt it
_caught = 0  # the first stop signal received, 0 if none


class Stopped(BaseException):
    """A stop signal arrived: raised in the main thread to leave what it was doing (a watch, a
    worker's start) for the `finally` that stops the server. Not an Exception, so no `except
    Exception` swallows it."""


def _on_stop_signal(signum: int, _frame: object) -> None:
    global _caught
    if not _caught:
        _caught = signum
    if not _stopping:
        raise Stopped(signum)


def catch_stop_signals() -> None:
    """Stop signals raise `Stopped` from now on, and any that came while they were blocked (see
    `block_stop_signals`) is handled now. A signal the process inherited as ignored stays
    ignored: PySpark starts its JVM with SIGINT ignored, so that Ctrl-C cancels a job in a
    shell without killing the driver, and its state server must not die of that Ctrl-C either."""
    for sig in STOP_SIGNALS:
        if _signal.getsignal(sig) != _signal.SIG_IGN:
            _signal.signal(sig, _on_stop_signal)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, STOP_SIGNALS)


def block_stop_signals() -> None:
    """Holds stop signals pending (the kernel keeps them) until `catch_stop_signals`: across a
    fork, whose child must not be missed, and across the exec of the bare watch, which resets
    every handler but keeps the mask, so a signal in that window is handled by the new program."""
    _signal.pthread_sigmask(_signal.SIG_BLOCK, STOP_SIGNALS)


def default_stop_signals() -> None:
    """In a forked worker: stop signals end it at once (it holds nothing the supervisor does
    not remove), quietly instead of with a traceback of `Stopped`; ignored ones stay ignored."""
    for sig in STOP_SIGNALS:
        if _signal.getsignal(sig) != _signal.SIG_IGN:
            _signal.signal(sig, _signal.SIG_DFL)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, STOP_SIGNALS)


def stopping() -> None:
    """From here on the server is stopping: a stop signal is noted, no longer raised."""
    global _stopping
    _stopping = True


def end_by_signal() -> None:
    """If a stop signal came, ends this process by it (once the server is stopped), so its exit
    status says so as it would have without a handler. Returns if none came."""
    if _caught:
        _signal.signal(_caught, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (_caught,))
        os.kill(os.getpid(), _caught)


def exit_code(pid: int) -> int | None:
    """A child's exit status once it exited (a signal as its negative), else None; reaps it."""
    got, status = os.waitpid(pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if got == pid else None


def kill(pid: int) -> int:
    """Kills a child that has not been reaped yet, and reaps it; its exit status."""
    try:
        os.kill(pid, _SIGKILL)
    except ProcessLookupError:
        pass
    try:
        _pid, status = os.waitpid(pid, 0)
    except ChildProcessError:  # reaped already (a stop signal came right after its waitpid)
        return -_SIGKILL
    return os.waitstatus_to_exitcode(status)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def remove_dirs(paths: list[str]) -> None:
    """`shutil.rmtree(path, ignore_errors=True)` for each path, without shutil: the sockets and
    the local stores (a cache of the checkpoint). Symbolic links are removed, not followed."""
    for path in dict.fromkeys(paths):  # --socket-dir may be --root
        for top, dirs, files in os.walk(path, topdown=False):
            for name in files + dirs:
                full = os.path.join(top, name)
                try:
                    if os.path.isdir(full) and not os.path.islink(full):
                        os.rmdir(full)
                    else:
                        os.unlink(full)
                except OSError:
                    pass
        try:
            os.rmdir(path)
        except OSError:
            pass


def _stdin_closed(fd: int, timeout_s: float) -> bool:
    """Waits up to `timeout_s` for input on `fd`; True once it reached EOF (or cannot be read)."""
    try:
        readable, _, _ = select.select([fd], [], [], timeout_s)
        return bool(readable) and not os.read(fd, 4096)
    except OSError:
        return True


def watch(pids: list[int], stdin_fd: int = 0) -> int | None:
    """Waits until the server must stop: returns the pid of a worker that exited (reaped), or
    None when `stdin_fd` reached EOF (the executor JVM is gone or stopped the server)."""
    while not _stdin_closed(stdin_fd, POLL_S):
        for i, pid in enumerate(pids):
            code = exit_code(pid)
            if code is not None:
                print(f"ttlstate server: worker {i} (pid {pid}) exited ({code}); shutting down so "
                      "the shim restarts us", file=sys.stderr, flush=True)
                return pid
    return None


def stop(pids: list[int], fds: list[int], dirs: list[str], reaped: int | None = None) -> None:
    """Kills the workers (but `reaped`, already waited for), closes the pipes to them and
    removes the server's directories."""
    stopping()
    for pid in pids:
        if pid != reaped:
            kill(pid)
    close_all(fds)
    remove_dirs(dirs)


def run(pids: list[int], fds: list[int], dirs: list[str], stdin_fd: int = 0) -> None:
    """Watches until the server must stop, then stops it (also when the watch failed or a stop
    signal came, after which the process ends by that signal)."""
    exited = None
    try:
        catch_stop_signals()
        exited = watch(pids, stdin_fd)
    except Stopped:
        pass
    finally:
        stop(pids, fds, dirs, exited)
    end_by_signal()


def exec_watch(workers: list[tuple[int, list[int]]], root: str, socket_dir: str | None) -> None:
    """Replaces this process by `python -I -S supervise.py`, which runs `run`: `workers` are
    (pid, this process's pipe ends to it); `root` and `socket_dir` (the server's, the latter only
    if it has one apart from `root`, as on its own command line) are removed at the end.
    Stop signals are blocked from here (the caller blocked them before its READY line), so one
    sent meanwhile waits for the new program's handler. Returns only if the exec failed (raises
    OSError)."""
    script = os.path.abspath(__file__)
    if not sys.executable or not os.path.isfile(script):  # e.g. imported from a zip
        raise OSError(f"no interpreter ({sys.executable!r}) or no file to run ({script})")
    args = [sys.executable, "-I", "-S", script, "--root", root]
    if socket_dir is not None:
        args += ["--socket-dir", socket_dir]
    for pid, fds in workers:
        for fd in fds:
            os.set_inheritable(fd, True)
        args += ["--worker", ",".join(str(x) for x in (pid, *fds))]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, args)


def main(argv: list[str]) -> int:
    """`--root PATH --socket-dir PATH` (the server's, removed at the end), then
    `--worker PID,FD[,FD...]` per worker."""
    pids: list[int] = []
    fds: list[int] = []
    dirs: list[str] = []
    args = iter(argv)
    for flag in args:
        value = next(args, "")
        if flag == "--worker":
            pid, *own = (int(x) for x in value.split(","))
            pids.append(pid)
            fds += own
        elif flag in ("--root", "--socket-dir"):
            dirs.append(value)
        else:
            print(f"ttlstate server: supervise.py takes --root, --socket-dir and --worker, not {flag!r}",
                  file=sys.stderr)
            return 2
    run(pids, fds, dirs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
