"""What the NodeManager's physical-memory check sees: per YARN container, the RSS of all its
processes summed (YARN's default ProcfsBasedProcessTree, not PSS: pages the forked state server
workers share count once per worker), sampled while the applications run, with the state
server's part of it."""

from __future__ import annotations

import threading

import psutil
from benchmarks.harness.subproc import LAUNCHERS, SERVER_MARKERS


def _is_server(p: psutil.Process) -> bool:
    """A state server process (its supervisor or a worker), never the JVM or a launcher script,
    whose command lines may name ttlstate's classes."""
    if p.name() in ("java", *LAUNCHERS):
        return False
    return any(m in part for part in p.cmdline() for m in SERVER_MARKERS)


class ContainerSampler:
    def __init__(self, yarn_pid: int, every_s: float = 0.5) -> None:
        self.yarn_pid = yarn_pid
        self.every_s = every_s
        self.peaks: dict[str, tuple[int, int]] = {}  # container: (peak total RSS, server RSS then)
        self.server_peaks: dict[str, int] = {}
        self._containers: dict[int, str | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ContainerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _container(self, p: psutil.Process) -> str | None:
        if p.pid not in self._containers:
            self._containers[p.pid] = p.environ().get("CONTAINER_ID")
        return self._containers[p.pid]

    def sample(self) -> None:
        totals: dict[str, list[int]] = {}
        for p in psutil.Process(self.yarn_pid).children(recursive=True):
            try:
                container = self._container(p)
                if container is None:
                    continue
                rss = p.memory_info().rss
                entry = totals.setdefault(container, [0, 0])
                entry[0] += rss
                if _is_server(p):
                    entry[1] += rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        for container, (total, server) in totals.items():
            if total > self.peaks.get(container, (0, 0))[0]:
                self.peaks[container] = (total, server)
            self.server_peaks[container] = max(server, self.server_peaks.get(container, 0))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.sample()
            except psutil.NoSuchProcess:
                return
