"""Running one benchmark step in a child Python process (a fresh JVM), watching its memory.

Each provider variant runs in its own process so that no JVM warm-up, class loading, state
server or cache of one provider helps or hurts another, and so that a baseline variant can
import an older ttlstate. The parent polls the resident memory of the child's process tree
every ~100 ms: the JVM (the `java` child: Spark's RocksDB lives in it) and ttlstate's state
server (`python -m ttlstate.server` and the worker processes it forks, each with its own
RocksDB; their RSS is summed).

Alongside RSS it records PSS (proportional set size, from `/proc/<pid>/smaps_rollup`): a
page shared by n processes counts 1/n in each. The server's processes share their
interpreter's and RocksDB's library pages (and, forked, what the supervisor loaded before the
fork), which a sum of RSS counts once per process; the sum
of PSS counts them once, which is what the machine pays. For one process alone (the JVM) the
two differ only by the library pages it shares with others.

With `jvm_breakdown_every` > 0 the JVM runs with Native Memory Tracking and the poller asks
`jcmd` for its summary that often, keeping the one taken at the highest JVM RSS: heap,
metaspace, GC structures, threads... and `rss_minus_nmt`, RSS minus NMT's committed total: the
native memory of libraries (in Spark's RocksDB provider, RocksDB itself) less the committed
heap not yet touched (so it can be negative). It tells a memory difference between two variants
that is heap G1 chose to commit from one that is data the code holds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MB = 1024 * 1024


@dataclass
class PeakRss:
    """Highest RSS seen per role; `total` is the highest JVM + server sum of one sample."""

    jvm: int = 0
    server: int = 0
    total: int = 0
    jvm_pss: int = 0
    server_pss: int = 0
    total_pss: int = 0
    samples: int = 0
    server_files: set[str] = field(default_factory=set)
    load_sum: float = 0.0  # of the machine's 1-minute load average, one term per sample
    jvm_breakdown: dict[str, float] | None = None  # MB by NMT category, at the highest RSS sampled
    jvm_breakdown_rss: int = 0

    def as_dict(self) -> dict[str, object]:
        """Also the mean load average while the child ran: on this shared machine it tells how
        much of a difference between two variants may be other work, not the code."""
        return {"jvm_peak_rss_mb": round(self.jvm / MB, 1), "server_peak_rss_mb": round(self.server / MB, 1),
                "total_peak_rss_mb": round(self.total / MB, 1),
                "jvm_peak_pss_mb": round(self.jvm_pss / MB, 1),
                "server_peak_pss_mb": round(self.server_pss / MB, 1),
                "total_peak_pss_mb": round(self.total_pss / MB, 1), "rss_samples": self.samples,
                "loadavg_1m_mean": round(self.load_sum / self.samples, 2) if self.samples else None,
                "server_files": sorted(self.server_files),
                **({"jvm_breakdown_mb": self.jvm_breakdown} if self.jvm_breakdown else {})}


# `-m ttlstate.server` (workers; the supervisor until it execs `ttlstate/server/supervise.py`)
SERVER_MARKERS = ("ttlstate.server", "ttlstate-server", "ttlstate/server/supervise.py")
LAUNCHERS = ("bash", "sh", "dash", "jspawnhelper")


def _role(p: psutil.Process) -> str | None:
    """'jvm', 'server' or None. Launchers are never classified: `spark-submit` is a bash
    script whose command line names the app and jars and which later execs the JVM."""
    name = p.name()
    if name == "java":
        return "jvm"
    if name in LAUNCHERS:
        return None
    if any(marker in part for part in p.cmdline() for marker in SERVER_MARKERS):
        return "server"
    return None


def _ttlstate_mappings(pid: int) -> set[str]:
    """Files of ttlstate mapped by a server process (its native extension): which tree runs."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return {line.split(None, 5)[5].strip() for line in f
                    if "ttlstate" in line and len(line.split(None, 5)) == 6}
    except OSError:
        return set()


NMT_FLAG = "-XX:NativeMemoryTracking=summary"
_NMT_LINE = re.compile(r"^-\s*(.+?) \(reserved=\d+KB, committed=(\d+)KB")
_NMT_TOTAL = re.compile(r"^Total: reserved=\d+KB, committed=(\d+)KB")


def jvm_breakdown(pid: int, rss: int) -> dict[str, float] | None:
    """`jcmd <pid> VM.native_memory summary` in MB per category (1 MB and more), its total and
    `rss_minus_nmt`; None if the JVM does not answer (no NMT, gone)."""
    jcmd = shutil.which("jcmd") or os.path.join(os.environ.get("JAVA_HOME", "/usr"), "bin", "jcmd")
    try:
        out = subprocess.run([jcmd, str(pid), "VM.native_memory", "summary"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_nmt_summary(out, rss)


def parse_nmt_summary(out: str, rss: int) -> dict[str, float] | None:
    """What `jvm_breakdown` returns, from jcmd's text."""
    found: dict[str, float] = {}
    for line in out.splitlines():
        line = line.strip()
        if m := _NMT_TOTAL.match(line):
            found["total"] = round(int(m.group(1)) / 1024, 1)
        elif (m := _NMT_LINE.match(line)) and int(m.group(2)) >= 1024:
            found[m.group(1)] = round(int(m.group(2)) / 1024, 1)
    if "total" not in found:
        return None
    found["rss_minus_nmt"] = round(rss / MB - found["total"], 1)
    return found


def _pss(pid: int) -> int:
    """The process's proportional set size in bytes (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssPoller(threading.Thread):
    """Samples the RSS of a process's descendants until stopped."""

    def __init__(self, pid: int, interval: float = 0.1, jvm_breakdown_every: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.breakdown_every = jvm_breakdown_every
        self._last_breakdown = 0.0
        self.peak = PeakRss()
        self._roles: dict[tuple[int, float, str], str] = {}
        self._mapped: set[int] = set()
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.sample()

    def stop(self) -> PeakRss:
        self._stop_event.set()
        self.join(timeout=5)
        return self.peak

    def _role_of(self, p: psutil.Process) -> str | None:
        key = (p.pid, p.create_time(), p.name())  # exec keeps pid and start time, not the name
        role = self._roles.get(key)
        if role is None:
            role = _role(p)
            if role is not None:  # only settled roles are cached: a launcher execs later
                self._roles[key] = role
        return role

    def _breakdown(self, pid: int, rss: int) -> None:
        """An NMT summary every `breakdown_every` s (jcmd is a JVM of its own: seconds of CPU,
        and RSS sampling waits for it, so a short peak may go unseen); kept if the JVM's RSS is
        the highest of those summaries."""
        now = time.monotonic()
        if now - self._last_breakdown < self.breakdown_every or rss <= self.peak.jvm_breakdown_rss:
            return
        self._last_breakdown = now
        found = jvm_breakdown(pid, rss)
        if found is not None:
            self.peak.jvm_breakdown, self.peak.jvm_breakdown_rss = found, rss

    def sample(self) -> None:
        try:
            procs = psutil.Process(self.pid).children(recursive=True)
        except psutil.Error:
            return
        rss = {"jvm": 0, "server": 0}
        pss = {"jvm": 0, "server": 0}
        for p in procs:
            try:
                role = self._role_of(p)
                if role is None:
                    continue
                resident = p.memory_info().rss
                rss[role] += resident
                pss[role] += _pss(p.pid)
                if role == "jvm" and self.breakdown_every > 0:
                    self._breakdown(p.pid, resident)
                if role == "server" and p.pid not in self._mapped:
                    found = _ttlstate_mappings(p.pid)
                    if any(".so" in f for f in found):
                        self._mapped.add(p.pid)
                    self.peak.server_files |= found
            except psutil.Error:
                continue
        self.peak.jvm = max(self.peak.jvm, rss["jvm"])
        self.peak.server = max(self.peak.server, rss["server"])
        self.peak.total = max(self.peak.total, rss["jvm"] + rss["server"])
        self.peak.jvm_pss = max(self.peak.jvm_pss, pss["jvm"])
        self.peak.server_pss = max(self.peak.server_pss, pss["server"])
        self.peak.total_pss = max(self.peak.total_pss, pss["jvm"] + pss["server"])
        self.peak.samples += 1
        self.peak.load_sum += os.getloadavg()[0]


class ChildFailed(RuntimeError):
    """A child that failed or timed out; `peak` is the memory it reached until then."""

    def __init__(self, message: str, peak: PeakRss | None = None) -> None:
        super().__init__(message)
        self.peak = peak


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """The child and everything it started (its JVM, the state server), by pid."""
    try:
        procs = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        procs = []
    proc.kill()
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def _tail(path: str, lines: int = 40) -> str:
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def run_child(module: str, params: dict[str, object], env: dict[str, str], log: str,
              timeout: float, jvm_breakdown_every: float = 0.0) -> tuple[dict[str, object], PeakRss]:
    """Run `python -m module PARAMS OUT` from the repo root; its JSON result and peak RSS (and
    with `jvm_breakdown_every`, the JVM's memory by category, see the module's docstring).

    The child's output goes to `log`, shown on failure."""
    if jvm_breakdown_every > 0:
        env = {**env, "JAVA_TOOL_OPTIONS": f"{env.get('JAVA_TOOL_OPTIONS', '')} {NMT_FLAG}".strip()}
    with tempfile.TemporaryDirectory(prefix="ttlstate-bench-child-") as tmp:
        params_path, out_path = os.path.join(tmp, "params.json"), os.path.join(tmp, "out.json")
        with open(params_path, "w") as f:
            json.dump(params, f)
        with open(log, "a") as out:
            proc = subprocess.Popen([sys.executable, "-m", module, params_path, out_path], cwd=REPO,
                                    env=env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        poller = RssPoller(proc.pid, jvm_breakdown_every=jvm_breakdown_every)
        poller.start()
        started = time.monotonic()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            proc.wait()
            raise ChildFailed(f"{module} timed out after {timeout:.0f}s; log {log}:\n{_tail(log)}",
                              poller.stop()) from None
        finally:
            peak = poller.stop()  # stopping twice is harmless
        if rc != 0 or not os.path.exists(out_path):
            raise ChildFailed(f"{module} exited {rc} after {time.monotonic() - started:.0f}s; "
                              f"log {log}:\n{_tail(log)}", peak)
        with open(out_path) as f:
            return json.load(f), peak
