"""The shim jar of a source build (`pip install .`, `pip install <source checkout or URL>`): which
Spark it is compiled against, and building it (setup.py's build_py runs `ensure_jars`).

pip builds in an isolated environment holding only the build requirements (setuptools, wheel):
no pyspark. The jar is compiled against the Spark the package is being installed beside: the
pyspark of the interpreter running the build, asked outside pip's isolation (`python -I`), else
`$SPARK_HOME`'s, or a jars directory named in TTLSTATE_SPARK_JARS. Not against a pyspark added to
the build requirements, because
- the jar must be that Spark's line (one jar per line), which a requirement would have to guess;
- that Spark's own jars are the ground truth of its API (a vendor's build, `3.5.0-amzn-1`,
  included), and its Scala compiler comes with them (pyspark and Spark distributions ship it);
- they are on the disk already, where a requirement would download 300-450 MB into every build.
A package built so carries the jar of that one line; a wheel of `make wheel`, or an sdist of
`make release`, carries every line's (then nothing is compiled here, and no JDK is needed).
Standard library only: it runs inside the isolated build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JAR_DIR = ROOT / "python" / "ttlstate" / "jars"
# What a jar is compiled from: the Scala sources and the Python the generated Scala comes from.
SOURCES = (ROOT / "jvm-shim" / "src", ROOT / "python" / "ttlstate", ROOT / "scripts")
MIN_JAVA = 17  # scalac -release 17 (scripts/scalac.sh); Spark 4 needs 17 as well


class ShimBuildError(RuntimeError):
    """The source build cannot make the jar of the Spark it is installed for: says what it needs."""


@dataclass(frozen=True)
class TargetSpark:
    jars: Path      # the Spark's jars directory: what the shim is compiled against
    version: str    # its Spark version
    found_as: str   # how it was found, for the build's log


def _lines() -> Any:
    """python/ttlstate/spark/lines.py (standard library only), without importing the package."""
    sys.path.insert(0, str(ROOT / "python"))
    try:
        from ttlstate.spark import lines
    finally:
        sys.path.pop(0)
    return lines


def _version_of(jars: Path) -> str | None:
    for core in sorted(jars.glob("spark-core_*.jar")):
        match = re.fullmatch(r"spark-core_[\d.]+-(.+)", core.stem)  # spark-core_2.12-3.5.9 -> 3.5.9
        if match:
            return match.group(1)
    return None


def _installed_pyspark() -> Path | None:
    """The jars of the pyspark the build's interpreter has outside pip's build isolation: `-I`
    ignores the PYTHONPATH that isolation adds (its sitecustomize hides the environment's
    site-packages), so this sees the environment the package is being installed into."""
    probe = "import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), 'jars'))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    try:
        done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                              env=env, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None
    return path if path is not None and path.is_dir() else None


def target_spark() -> TargetSpark | None:
    """The Spark to compile against: TTLSTATE_SPARK_JARS, else this environment's pyspark, else
    $SPARK_HOME's; None when there is none."""
    candidates: list[tuple[Path | None, str]] = []
    if os.environ.get("TTLSTATE_SPARK_JARS"):
        candidates.append((Path(os.environ["TTLSTATE_SPARK_JARS"]), "TTLSTATE_SPARK_JARS"))
    else:
        candidates.append((_installed_pyspark(), f"the pyspark of {sys.executable}"))
        if os.environ.get("SPARK_HOME"):
            candidates.append((Path(os.environ["SPARK_HOME"]) / "jars", "SPARK_HOME"))
    for jars, how in candidates:
        version = _version_of(jars) if jars is not None and jars.is_dir() else None
        if version:
            return TargetSpark(jars, version, how)
        if how == "TTLSTATE_SPARK_JARS":
            raise ShimBuildError(f"ttlstate: TTLSTATE_SPARK_JARS={jars} is not a Spark's jars directory "
                                 "(no spark-core_*.jar in it)")
    return None


def _java_home_bin() -> str | None:
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin") if home and os.path.isfile(os.path.join(home, "bin", "javac")) else None


def _jdk_problem(path: str) -> str | None:
    """Why the JDK on `path` cannot build the jar (None if it can)."""
    missing = [tool for tool in ("java", "javac", "jar") if shutil.which(tool, path=path) is None]
    if missing:
        return f"no {', '.join(missing)} on PATH (a JDK, not only a JRE, is needed)"
    out = subprocess.run(["javac", "-version"], capture_output=True, text=True,
                         env={**os.environ, "PATH": path}, check=False)
    words = (out.stdout + out.stderr).split()
    major = words[1].split(".")[0] if len(words) > 1 else ""
    if not major.isdigit() or int(major) < MIN_JAVA:
        return f"javac is {' '.join(words) or 'unknown'}, and the shim needs a JDK {MIN_JAVA} or later"
    return None


def _newest_source() -> float:
    return max(p.stat().st_mtime for d in SOURCES for p in d.rglob("*")
               if p.suffix in (".scala", ".java", ".py", ".sh")
               and "test" not in p.relative_to(ROOT).parts[:3])


def _fresh(jars: list[Path]) -> bool:
    return all(j.exists() for j in jars) and min(j.stat().st_mtime for j in jars) >= _newest_source()


NEEDS = ("a source build of ttlstate compiles the shim jar of the Spark it is installed for, so it needs "
         "that Spark and a JDK {java}: install pyspark (a line ttlstate serves: {lines}, e.g. `pip install "
         "'pyspark==3.5.*'`) into this environment first, or set SPARK_HOME (or TTLSTATE_SPARK_JARS) to a "
         "Spark whose jars/ to compile against; and a JDK {java} (`javac`; Debian/Ubuntu: apt-get install "
         "openjdk-17-jdk-headless). A wheel built with `make wheel`, or an sdist of `make release`, carries "
         "every line's jar and needs neither.")


def ensure_jars(say: Callable[[str], None] = print) -> list[Path]:
    """Makes sure python/ttlstate/jars holds the jars of the Spark this build is for (building
    them when missing or older than their sources); returns the jars it holds. Raises
    ShimBuildError naming what is needed."""
    lines = _lines()
    present = sorted(JAR_DIR.glob("ttlstate-shim-spark*.jar"))
    if os.environ.get("TTLSTATE_PREBUILT_JARS") == "1":
        say("ttlstate: TTLSTATE_PREBUILT_JARS=1: packaging the jars present, compiling none: "
            f"{', '.join(p.name for p in present) or 'none'}")
        return present
    spark = target_spark()
    supported = ", ".join(lines.LINES)
    if spark is None:
        if present:  # an sdist of `make release` or a tree after `make jars`: every line's already
            say(f"ttlstate: no Spark found to compile against; packaging the jars present: "
                f"{', '.join(p.name for p in present)}")
            return present
        raise ShimBuildError("ttlstate: no Spark found in this environment (no pyspark importable by "
                             f"{sys.executable}, SPARK_HOME not set): "
                             + NEEDS.format(java=MIN_JAVA, lines=supported))
    try:
        line = lines.line_for(spark.version)
    except lines.UnsupportedSpark as e:
        raise ShimBuildError(f"ttlstate: the Spark to build for ({spark.found_as}, {spark.jars}) is "
                             f"{spark.version}: {e}") from None
    wanted = [JAR_DIR / line.jar, JAR_DIR / line.tools_jar]
    if _fresh(wanted):
        say(f"ttlstate: the shim jar for Spark {line.minor} is built already ({wanted[0].name})")
        return sorted(JAR_DIR.glob("ttlstate-shim-spark*.jar"))
    path = os.pathsep.join(p for p in (_java_home_bin(), os.environ.get("PATH", "")) if p)
    problem = _jdk_problem(path)
    if problem:
        if all(j.exists() for j in wanted):
            say(f"ttlstate: WARNING: {wanted[0].name} is older than its sources and cannot be rebuilt here "
                f"({problem}); packaging it as it is")
            return sorted(JAR_DIR.glob("ttlstate-shim-spark*.jar"))
        raise ShimBuildError(f"ttlstate: cannot compile the shim jar for Spark {spark.version} "
                             f"({spark.found_as}): {problem}. "
                             + NEEDS.format(java=MIN_JAVA, lines=supported))
    say(f"ttlstate: compiling the shim jar for Spark {line.minor} against Spark {spark.version} "
        f"({spark.found_as}: {spark.jars}); this takes one to a few minutes")
    # A user's install always compiles (the jar cache is the dev tree's: make, scripts/build_shim.sh).
    env = {**{k: v for k, v in os.environ.items() if k != "TTLSTATE_JAR_CACHE"}, "PATH": path,
           "TTLSTATE_BUILD_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "build_shim.sh"), str(spark.jars), str(JAR_DIR)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    say(done.stdout + done.stderr)
    if done.returncode != 0 or not all(j.exists() for j in wanted):
        raise ShimBuildError(f"ttlstate: compiling the shim jar for Spark {spark.version} failed "
                             f"(scripts/build_shim.sh, exit {done.returncode}); its output is above")
    return sorted(JAR_DIR.glob("ttlstate-shim-spark*.jar"))
