"""A description of the machine a benchmark ran on, stored with every result."""

from __future__ import annotations

import os
import platform
import subprocess


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        return 0.0


def _rocksdb_version() -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "librocksdb-dev"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def uptime() -> str:
    """`uptime`'s line (the load averages): how busy the machine was, which on a shared machine
    bounds what a timing means."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def describe() -> dict[str, object]:
    import pyspark

    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _mem_gib(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "rocksdb": _rocksdb_version(),
        "uptime": uptime(),
    }
