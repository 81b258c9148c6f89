"""Crash points for tests: kill this process with SIGKILL at a named point, once (or stall there).
(And, in-process only, `on_point`: run a test's function there, e.g. to act while a snapshot
is being written.)

It exists so that tests can crash a state server worker at moments no outside signal can hit
reliably, e.g. in the middle of a commit: after the changelog was written locally but before
it reached the checkpoint, or after it reached the checkpoint but before the shim got the
reply. It is inert unless the environment variable `TTLSTATE_FAULTS` is set, and it is read
once, when the server imports this module (before it forks its workers).

`TTLSTATE_FAULTS=point:marker[,point:marker...]`, e.g.
`commit-after-upload:/tmp/x/after`. When execution reaches `crash_point("commit-after-upload")`
and the marker file can be created (it does not exist yet), the marker is created and the
process kills itself with SIGKILL: no cleanup, no reply, as in a real crash. A marker that
already exists disarms the point, so a test arms it by deleting the marker, and the crash
happens exactly once even across retries and restarted servers.

`point+busy=MS:marker` and `point+idle=MS:marker` stall there instead, once, for MS
milliseconds: `busy` burns CPU (a slow but working server, e.g. a long snapshot, which the
shim's watchdog must wait for), `idle` sleeps (a live server that neither works nor answers,
which the watchdog must take for hung).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

ENV = "TTLSTATE_FAULTS"
POINTS = ("commit-before-upload", "commit-after-upload", "snapshot-before-write",
          # `ttlstate repartition`'s driver (spark/repartition.py): its new state staged, then each
          # step of the switch done
          "repartition-staged", "repartition-old-state-aside", "repartition-offsets-switched",
          "repartition-ids-switched", "repartition-switched",
          # store/in_place.py: the background check of files a restore reads in place, started
          "in-place-check",
          # store/rebuild.py: a restore's local DB opened on placeholders read through the shim
          "in-place-opened",
          # store/local_fill.py: a placeholder about to be copied to the local disk
          "local-fill")


_ACTION = re.compile(r"^(busy|idle)=(\d+)$")


@dataclass(frozen=True)
class Fault:
    marker: str
    action: str = "kill"  # or busy, idle
    ms: int = 0


def _parse(spec: str) -> dict[str, Fault]:
    out: dict[str, Fault] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        head, sep, marker = item.partition(":")
        point, plus, action = head.partition("+")
        m = _ACTION.match(action)
        if not sep or point not in POINTS or not marker or (plus and not m):
            raise ValueError(f"{ENV}: bad entry {item!r}; expected point[+busy=MS|+idle=MS]:marker with "
                             f"point one of {POINTS}")
        out[point] = Fault(marker, m.group(1), int(m.group(2))) if m else Fault(marker)
    return out


_ARMED = _parse(os.environ.get(ENV, ""))
_HOOKS: dict[str, Callable[[], None]] = {}


def on_point(point: str, fn: Callable[[], None] | None) -> None:
    """In-process tests: call `fn` whenever execution reaches `point` (None: stop)."""
    if point not in POINTS:
        raise ValueError(f"unknown point {point!r}; known: {POINTS}")
    if fn is None:
        _HOOKS.pop(point, None)
    else:
        _HOOKS[point] = fn


def crash_point(point: str) -> None:
    """SIGKILL this process here (or stall) if `point` is configured and its marker does not exist yet."""
    hook = _HOOKS.get(point)
    if hook is not None:
        hook()
    fault = _ARMED.get(point)
    if fault is None:
        return
    try:
        os.close(os.open(fault.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return  # disarmed, or it already fired
    if fault.action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    end = time.monotonic() + fault.ms / 1000
    while time.monotonic() < end:
        if fault.action == "idle":
            time.sleep(end - time.monotonic())
