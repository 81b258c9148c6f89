"""An older ttlstate checkout to compare against in the same run (`--baseline REF`).

The machine's speed drifts 2-3x between runs, so a before/after claim is only worth a ratio
measured in one invocation. `prepare(REF)` makes a detached git worktree of REF in a cache
directory (reused when present), builds its native extension in place and its shim jar with
this venv's Python, and returns the environment under which a subprocess imports the OLD
package: `PYTHONPATH=<tree>/python` comes before this venv's editable install, so the old
`configure()` puts the old jar on `spark.jars`, and the JVM, which inherits that environment,
starts the old state server too.

`python -m benchmarks.harness.baseline REF` prepares REF and prints what a subprocess imports.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.environ.get("TTLSTATE_BENCH_CACHE",
                       os.path.join(os.path.expanduser("~"), ".cache", "ttlstate-bench"))
JARS = os.path.join("python", "ttlstate", "jars")
STAMP = ".ttlstate-bench-built"


@dataclass(frozen=True)
class Baseline:
    """A built checkout of REF and the environment that makes a subprocess use it."""

    ref: str
    sha: str
    tree: str
    python: str
    env: dict[str, str] = field(repr=False)

    @property
    def short(self) -> str:
        return self.sha[:7]

    def describe(self) -> dict[str, str]:
        """What goes into a results file (not the environment, which may hold anything)."""
        return {"ref": self.ref, "sha": self.sha, "tree": self.tree, "python": self.python}


def _git(*args: str, cwd: str = REPO) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {cwd}: {out.stderr.strip()}")
    return out.stdout.strip()


def resolve(ref: str) -> str:
    """The full commit sha of REF in this repository."""
    return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


@contextmanager
def _locked(path: str) -> Iterator[None]:
    """Two benchmark runs preparing the same baseline at once must not both build it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _checkout(sha: str, tree: str) -> None:
    """A detached worktree of sha at tree, unless a checkout of that sha is already there."""
    if os.path.exists(os.path.join(tree, ".git")):
        head = _git("rev-parse", "HEAD", cwd=tree)
        if head != sha:
            raise RuntimeError(f"{tree} holds {head}, not {sha}; remove it with "
                               f"`git worktree remove --force {tree}`")
        return
    _git("worktree", "prune")  # a cache dir deleted by hand leaves a stale registration
    _git("worktree", "add", "--detach", tree, sha)


def _run_logged(cmd: list[str], cwd: str, log: str) -> None:
    with open(log, "a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        rc = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        with open(log) as f:
            tail = "".join(f.readlines()[-30:])
        raise RuntimeError(f"{' '.join(cmd)} failed in {cwd} (exit {rc}); log {log}:\n{tail}")


def _per_line(tree: str) -> bool:
    """Whether tree builds one shim jar per Spark line (build_shim.sh PYTHON OUT_DIR) rather than
    one jar (build_shim.sh PYTHON OUT_JAR, before the Spark lines)."""
    return os.path.isdir(os.path.join(tree, "jvm-shim", "src", "spark"))


def _jar(tree: str, python: str) -> str:
    """The shim jar tree's build makes for the pyspark of python."""
    if not _per_line(tree):
        return os.path.join(tree, JARS, "ttlstate-shim.jar")
    version = subprocess.run([python, "-c", "import pyspark; print(pyspark.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    minor = ".".join(version.split(".")[:2])
    return os.path.join(tree, JARS, f"ttlstate-shim-spark{minor}.jar")


def _built(tree: str) -> str | None:
    """The Python a complete earlier build of tree was made with, or None."""
    stamp = os.path.join(tree, STAMP)
    # the pybind11 extension of older trees (_native*.so) or the C ABI library (libttlstate_native.so)
    natives = glob.glob(os.path.join(tree, "python", "ttlstate", "*native*.so"))
    if not (os.path.exists(stamp) and natives):
        return None
    with open(stamp) as f:
        python = f.read()
    return python if os.path.exists(_jar(tree, python)) else None


def _build(tree: str, python: str) -> None:
    """Native extension in place and the shim jar, once per (tree, python)."""
    if _built(tree) == python:
        return
    log = os.path.join(tree, "ttlstate-bench-build.log")
    print(f"baseline: building {tree} (log {log})", flush=True)
    if os.path.exists(os.path.join(tree, "setup.py")):
        _run_logged([python, "setup.py", "-q", "build_ext", "--inplace"], tree, log)
    out = os.path.join(tree, JARS) if _per_line(tree) else _jar(tree, python)
    _run_logged(["bash", "scripts/build_shim.sh", python, out], tree, log)
    with open(os.path.join(tree, STAMP), "w") as f:
        f.write(python)


def environment(tree: str, python: str) -> dict[str, str]:
    """This process's environment with the old package first on the path, for the driver, the
    JVM it launches, and the state server the JVM starts (all inherit it)."""
    env = dict(os.environ)
    rest = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.path.join(tree, "python") + (os.pathsep + rest if rest else "")
    env["PYSPARK_PYTHON"] = python
    return env


def imported_from(env: dict[str, str], python: str) -> str:
    """Where `import ttlstate` resolves under env: the proof that the old tree is used."""
    out = subprocess.run([python, "-c", "import ttlstate; print(ttlstate.__file__)"], env=env,
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"importing ttlstate under the baseline env failed: {out.stderr}")
    return out.stdout.strip()


def prepare(ref: str, python: str = sys.executable, cache: str = CACHE) -> Baseline:
    """Check out and build REF (reusing the cache), and check that it is what gets imported."""
    sha = resolve(ref)
    tree = os.path.join(cache, f"ttlstate-{sha[:12]}")
    with _locked(tree + ".lock"):
        _checkout(sha, tree)
        _build(tree, python)
    env = environment(tree, python)
    where = imported_from(env, python)
    if not where.startswith(os.path.join(tree, "python") + os.sep):
        raise RuntimeError(f"under the baseline env ttlstate comes from {where}, not {tree}")
    return Baseline(ref, sha, tree, python, env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref", help="a commit, tag or branch of this repository")
    args = ap.parse_args(argv)
    b = prepare(args.ref)
    print(json.dumps({**b.describe(), "ttlstate.__file__": imported_from(b.env, b.python)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
