"""What the wheel tests share: the repository root, the built wheel, and running a command with
an environment that cannot point Python or the loader back at the repository."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Built:
    wheel: Path
    build_seconds: float


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without anything that could point the loader or Python at the
    repository or at system libraries (nor Spark at another installation), plus `extra`."""
    drop = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV", "SPARK_HOME",
            "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, **(extra or {})}


def run(*args: str | Path, cwd: Path, timeout: float = 600,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=clean_env(env), capture_output=True,
                          text=True, timeout=timeout)
