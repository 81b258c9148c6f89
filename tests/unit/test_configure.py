"""`ttlstate.configure`: what it sets, and what it refuses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from ttlstate.config import keys as K
from ttlstate.config.parse import ConfError
from ttlstate.spark import configure as C
from ttlstate.spark import jars


class FakeBuilder:
    def __init__(self) -> None:
        self._options: dict[str, str] = {"spark.jars": "/x/other.jar", "spark.plugins": "com.x.Other"}

    def config(self, key: str, value: str) -> FakeBuilder:
        self._options[key] = value
        return self


@pytest.fixture(autouse=True)
def no_pyspark_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that has not started a JVM yet: earlier test modules of this pytest run
    leave PySpark's gateway up (launch modes with a running JVM: tests/spark/test_launch_modes.py)."""
    monkeypatch.setattr(C, "_running_jvm", lambda: None)
    monkeypatch.setattr(C, "_active_session", lambda: None)


def test_sets_provider_jar_interpreter_and_keys() -> None:
    b = C.configure(FakeBuilder(), ttl="30m", update_type="OnReadAndWrite", operator_ttl={2: "off"})
    opts = b._options
    assert opts[K.PROVIDER_CLASS_KEY] == K.PROVIDER_CLASS
    assert opts["spark.jars"].split(",") == ["/x/other.jar", C.jar_path()]
    assert opts[C.EXTENSIONS_KEY] == C.EXTENSIONS_CLASS
    assert opts["spark.plugins"] == f"com.x.Other,{C.PLUGIN_CLASS}"  # others' plugins kept
    assert K.PYTHON.key not in opts  # no PYSPARK_PYTHON: the executor decides
    assert opts[K.LOCAL_MODE_PYTHON.key] == sys.executable  # only local mode uses it
    assert opts[K.TTL.key] == "30m" and opts[K.UPDATE_TYPE.key] == "OnReadAndWrite"
    assert opts[K.operator_ttl_key(2)] == "off"


def test_a_running_jvm_keeps_the_shim_on_a_new_contexts_spark_jars(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second SparkContext in a running JVM (a notebook, a test process) that lists its own
    spark.jars would otherwise drop the shim, and a cluster's executors could not load the plugin."""
    monkeypatch.setattr(C, "_running_jvm", lambda: object())
    monkeypatch.setattr(C, "_require_loadable", lambda jvm: None)
    assert C.configure(FakeBuilder())._options["spark.jars"].split(",") == ["/x/other.jar", C.jar_path()]
    bare = FakeBuilder()
    del bare._options["spark.jars"]
    assert "spark.jars" not in C.configure(bare)._options  # the context inherits the launch's


def test_pyspark_python_is_used_not_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver's PYSPARK_PYTHON is the interpreter PySpark gives the executors' Python
    workers: the state server gets the same one. An explicit `python` still wins."""
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/executors/bin/python3")
    assert C.settings()[K.PYTHON.key] == "/opt/executors/bin/python3"
    assert C.settings(python=sys.executable)[K.PYTHON.key] == sys.executable


@pytest.mark.parametrize(("python", "local_python", "spark_python", "pyspark_python", "mode", "driver",
                          "expected"), [
    ("/p/conf", "/p/driver", "./environment/bin/python", "/p/env", "local", "/p/parent", "/p/conf"),
    # PySpark's own setting, with no ttlstate line (a YARN --archives venv, resolved in the container)
    ("-", "/p/driver", "./environment/bin/python", "/p/env", "cluster", "-", "./environment/bin/python"),
    ("-", "/p/driver", "-", "/p/env", "local", "/p/parent", "/p/env"),
    ("-", "/p/driver", "-", "-", "local", "/p/parent", "/p/driver"),
    ("-", "-", "-", "-", "local", "/p/parent", "/p/parent"),  # the three conf lines, python job.py
    ("-", "/p/driver", "-", "-", "cluster", "/p/parent", "python3"),  # the driver's path means nothing there
    ("-", "-", "-", "-", "local", "-", "python3"),
])
def test_the_shim_chooses_the_server_interpreter(python: str, local_python: str, spark_python: str,
                                                 pyspark_python: str, mode: str, driver: str,
                                                 expected: str) -> None:
    from tests.jvm_hooks import run_hook

    got = run_hook("ServerPythonChoice", python, local_python, spark_python, pyspark_python, mode, driver)
    assert got.strip() == expected


def test_the_start_checks_validate_with_the_drivers_own_interpreter(tmp_path: Path) -> None:
    """spark.pyspark.driver.python, PYSPARK_DRIVER_PYTHON, localModePython (configure's
    sys.executable), the Python that launched the JVM, then spark.pyspark.python, PYSPARK_PYTHON
    and the server's `python`: the first that runs here. A YARN archive's relative path counts
    only where it exists (cluster mode runs the driver in the container that has it)."""
    from tests.jvm_hooks import run_hook

    def choice(*hints: str) -> str:
        return run_hook("DriverPythonChoice", *hints).strip()
    me, relative = sys.executable, "./environment/bin/python"
    assert choice(me, "-", "-", "-", "-", "-", "-") == me
    assert choice("-", "-", me, "-", relative, relative, relative) == me  # YARN client mode with configure()
    assert choice("/missing/python3", "jupyter", "-", me, relative, "-", "-") == me  # launchers do not count
    assert choice("-", "-", "-", "-", relative, relative, "/opt/only-on-executors/python") == "python3"
    assert choice("-", "-", "-", "-", "-", "-", me) == me  # a Scala job with plain confs
    venv = tmp_path / "environment" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(me)
    got = subprocess.run(["java", "-cp", _hooks_classpath(), "ttlstate.tools.DriverPythonChoice",
                          "-", "-", "-", "-", relative, "-", "-"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    assert got.stdout.strip() == relative  # YARN cluster mode without configure(): the container's venv


def _hooks_classpath() -> str:
    from tests.jvm_hooks import spark_jars

    return f"{C.jar_path()}:{C.tools_jar_path()}:{spark_jars()}/*"


def test_a_missing_interpreter_is_refused_at_configure(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^python='/missing': no executable file at that path on this "
                                         r"machine; .*\./environment/bin/python.*--archives"):
        C.configure(FakeBuilder(), ttl="30m", python="/missing")
    not_executable = tmp_path / "python"
    not_executable.write_text("")
    with pytest.raises(ValueError, match="no executable file"):
        C.settings(local_mode_python=str(not_executable))
    # resolved where the server runs: in each container, on each executor's PATH
    assert C.settings(python="./environment/bin/python")[K.PYTHON.key] == "./environment/bin/python"
    assert C.settings(python="python3.11")[K.PYTHON.key] == "python3.11"
    assert C.settings(python=sys.executable)[K.PYTHON.key] == sys.executable


def test_durations_take_a_unit_or_a_timedelta() -> None:
    from datetime import timedelta

    confs = C.settings(ttl=timedelta(minutes=30), periodic_compaction=timedelta(days=2),
                       operator_ttl={"dedupe": timedelta(seconds=90), 1: "off", "2": None})
    assert confs[K.TTL.key] == "30m" and confs[K.FILTER_PERIODIC_COMPACTION.key] == "2d"
    assert confs[K.operator_ttl_key("dedupe")] == "90s"
    assert confs[K.operator_ttl_key(1)] == "off" and confs[K.operator_ttl_key(2)] == "off"
    assert C.settings(periodic_compaction=0)[K.FILTER_PERIODIC_COMPACTION.key] == "0"
    for bare in (5, 5.0, "5"):
        with pytest.raises(ValueError, match=r"ttl=.*has no unit.*5s.*timedelta"):
            C.settings(ttl=bare)
    with pytest.raises(ValueError, match=r"operator_ttl\['dedupe'\]=1 has no unit"):
        C.settings(operator_ttl={"dedupe": 1})
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        C.settings(ttl=timedelta(microseconds=1500))
    with pytest.raises(ValueError, match="positive"):
        C.settings(ttl=timedelta(0))
    with pytest.raises(TypeError, match=r"ttl=True: a bool is not a duration; allowed off, or a duration"):
        C.settings(ttl=True)
    with pytest.raises(ValueError, match=r"ttl=0: 0 is not a duration of this option"):
        C.settings(ttl=0)
    assert C.settings(periodic_compaction=timedelta(0))[K.FILTER_PERIODIC_COMPACTION.key] == "0ms"


def test_clock_options() -> None:
    from datetime import timedelta

    confs = C.settings(ttl="1h", time_source="activeTime", clock_max_gap=timedelta(minutes=5))
    assert confs[K.TIME_SOURCE.key] == "activeTime" and confs[K.CLOCK_MAX_GAP.key] == "5m"
    with pytest.raises(ValueError, match=r"clock_max_gap=300 has no unit"):
        C.settings(clock_max_gap=300)
    with pytest.raises(ValueError, match=r"Invalid value 'sundial' for conf .*timeSource"):
        C.settings(time_source="sundial")


def test_operator_ttl_by_id_or_name() -> None:
    confs = C.settings(operator_ttl={"dedupe": "1m", "stateStoreSave": "off", 3: "10s", "4": "1h"})
    assert confs[K.operator_ttl_key("dedupe")] == "1m"
    assert confs[K.operator_ttl_key("stateStoreSave")] == "off"
    assert confs[K.operator_ttl_key(3)] == "10s" and confs[K.operator_ttl_key(4)] == "1h"
    with pytest.raises(ConfError, match=r"operator\.dedup\.ttl.*one of|dedupe"):
        C.settings(operator_ttl={"dedup": "1m"})  # a typo of a name is refused, listing the names
    with pytest.raises(TypeError, match="dict of operator id or name"):
        C.settings(operator_ttl=["dedupe"])
    with pytest.raises(ValueError, match="ids are >= 0"):
        C.settings(operator_ttl={-1: "1m"})


def test_bad_values_and_unknown_options_are_refused_before_any_query() -> None:
    with pytest.raises(ConfError, match=r"ttlstate\.ttl"):
        C.configure(FakeBuilder(), ttl="forever")
    with pytest.raises(TypeError, match="unknown ttlstate option"):
        C.configure(FakeBuilder(), tll="30m")


@pytest.mark.parametrize("version", ["3.4.4", "4.4.0", "2.4.8"])
def test_spark_versions_without_a_shim_are_refused_naming_the_supported(monkeypatch: pytest.MonkeyPatch,
                                                                        version: str) -> None:
    monkeypatch.setattr(pyspark, "__version__", version)
    # An earlier test in this process may have started a driver JVM; its version would win.
    monkeypatch.setattr(jars, "_running_jvm_if_any", lambda: None)
    supported = r"3\.5, 4\.0, 4\.1, 4\.2, 4\.3"
    with pytest.raises(C.UnsupportedEnvironment, match=rf"no shim for Spark {version}.*{supported}"):
        C.configure(FakeBuilder())


def test_the_jar_is_the_running_sparks_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """configure() puts the jar of the installed pyspark's line on spark.jars; another line's jar
    is named for that line (the wheel carries every line's; a dev checkout builds its own)."""
    minor = ".".join(pyspark.__version__.split(".")[:2])
    assert C.configure(FakeBuilder())._options["spark.jars"].endswith(f"/ttlstate-shim-spark{minor}.jar")
    other = "4.0" if minor != "4.0" else "4.1"
    try:
        assert C.jar_path(other).endswith(f"/ttlstate-shim-spark{other}.jar")
    except FileNotFoundError as e:  # a checkout that built only its own line's jar
        assert f"ttlstate-shim-spark{other}.jar" in str(e) and "make jars" in str(e)


def test_the_minimum_python_is_pyprojects_requires_python() -> None:
    """One fact: what configure() refuses is what pip refuses (pyproject's requires-python)."""
    import os
    import tomllib

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml"), "rb") as f:
        requires = tomllib.load(f)["project"]["requires-python"]
    assert requires.startswith(">=") and C.MIN_PYTHON == tuple(int(p) for p in requires[2:].split("."))


def test_old_python_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "MIN_PYTHON", (sys.version_info.major, sys.version_info.minor + 1))
    with pytest.raises(C.UnsupportedEnvironment, match="needs Python"):
        C.check_environment()


def test_every_conf_key_has_a_configure_option_documented() -> None:
    by_option = set(C.OPTION_KEYS.values()) | {K.OPERATOR_TTL, K.OPERATOR_NAME_TTL}  # operator_ttl={...}
    assert by_option == set(K.ALL_KEYS)
    assert all(k.option for k in K.ALL_KEYS)
    assert all(name in C.configure.__doc__ for name in C.OPTION_KEYS)  # type: ignore[operator]
    # The configuration reference's table (kept up to date by test_docs) names each option.
    from ttlstate.docs.tables import conf_table

    table = conf_table()
    assert all(f"`{name}`" in table for name in C.OPTION_KEYS)
    assert 'operator_ttl={"dedupe"' in table and "operator_ttl={3" in table


def test_python_values_are_taken_by_the_keys_kind_and_others_refused_naming_option_value_allowed() -> None:
    """configure()'s coercion comes from each key's kind: a bool for a bool key, an int for an
    int or a size, a float for a number, the Enum member for an enum, os.PathLike for a path."""
    import pathlib

    from ttlstate.config.keys import UpdateType

    confs = C.settings(full_snapshot=False, workers=3, cache_max_bytes=1 << 20,
                       memory_write_buffer_ratio=0.25, update_type=UpdateType.ON_READ_AND_WRITE,
                       python=pathlib.Path(sys.executable))
    assert confs[K.FULL_SNAPSHOT.key] == "false" and confs[K.WORKERS.key] == "3"
    assert confs[K.CACHE_MAX_BYTES.key] == str(1 << 20) and confs[K.MEMORY_WRITE_BUFFER_RATIO.key] == "0.25"
    assert confs[K.UPDATE_TYPE.key] == "OnReadAndWrite" and confs[K.PYTHON.key] == sys.executable
    for option, value in (("workers", True), ("workers", 2.0), ("full_snapshot", 1), ("update_type", 3),
                          ("snapshot_layout", UpdateType.ON_READ_AND_WRITE),
                          ("memory_write_buffer_ratio", True)):
        with pytest.raises(TypeError) as e:
            C.settings(**{option: value})
        key = C.OPTION_KEYS[option]
        assert f"{option}={value!r}" in str(e.value) and f"allowed {key.allowed}" in str(e.value)
    with pytest.raises(ConfError, match=r"Invalid value '2000' for conf .*workers.*integer from 0 to 1024"):
        C.settings(workers=2000)


def test_ttl_off_is_said_once_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """`configure()` without `ttl=` leaves TTL off: one INFO line says so (and nothing when on)."""
    with caplog.at_level("INFO", logger="ttlstate.configure"):
        C.configure(FakeBuilder())
    lines = [r for r in caplog.records if r.name == "ttlstate.configure"]
    assert len(lines) == 1 and lines[0].levelname == "INFO"
    assert "TTL is off for every query of this session" in lines[0].getMessage()
    assert 'ttl="30m"' in lines[0].getMessage()
    caplog.clear()
    with caplog.at_level("INFO", logger="ttlstate.configure"):
        C.configure(FakeBuilder(), operator_ttl={"dedupe": "1h"})
    (only,) = [r.getMessage() for r in caplog.records if r.name == "ttlstate.configure"]
    assert f"operators without an operator_ttl entry (with one: {K.operator_ttl_key('dedupe')})" in only
    caplog.clear()
    with caplog.at_level("INFO", logger="ttlstate.configure"):
        C.configure(FakeBuilder(), ttl="5 seconds")
    assert not [r for r in caplog.records if r.name == "ttlstate.configure"]


def test_operator_names_are_refused_on_a_line_whose_checkpoints_name_no_operators() -> None:
    """Spark 3.5 writes no state metadata, so a store cannot tell which operator `dedupe` is:
    configure() refuses the key there, naming the key, the value and what the line allows."""
    from ttlstate.spark.configure import operator_names_message

    confs = {K.TTL.key: "1h", K.operator_ttl_key("dedupe"): "7s", K.operator_ttl_key(1): "1h"}
    said = operator_names_message(confs, "3.5.9")
    assert said is not None and said.startswith(
        f"Invalid conf '{K.operator_ttl_key('dedupe')}' (set to '7s'): operator names are allowed on Spark "
        "4.0 and later")
    assert "this is Spark 3.5.9" in said and K.operator_ttl_key("<operatorId>") in said
    assert operator_names_message(confs, "4.0.5") is None
    assert operator_names_message({K.operator_ttl_key(0): "7s"}, "3.5.9") is None  # ids work everywhere
