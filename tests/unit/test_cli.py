"""The `ttlstate` command: `python -m ttlstate`, `--version`, `inspect`'s location and `--at`
parsing and operator names, and `demo` without matplotlib."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import subprocess
import sys
from datetime import UTC, datetime

import pytest

import ttlstate
from ttlstate.cli.at_time import AtTime, parse_at
from ttlstate.cli.inspect_checkpoint import (
    NotATtlstateCheckpoint,
    StoreReport,
    local_path,
    main,
    operator_reports,
)
from ttlstate.cli.inspect_render import render
from ttlstate.cli.main import main as main_cli
from ttlstate.cli.operator_metadata import operator_names, parse_operator_metadata

NOW = 1_795_460_000_000


def test_python_dash_m_ttlstate_and_version() -> None:
    out = subprocess.run([sys.executable, "-m", "ttlstate", "--version"], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == f"ttlstate {ttlstate.__version__}"
    assert importlib.metadata.version("ttlstate") == ttlstate.__version__  # pyproject's version
    usage = subprocess.run([sys.executable, "-m", "ttlstate", "--help"], capture_output=True, text=True,
                           timeout=60, check=True)
    assert "inspect " in usage.stdout and "ttlstate[demo]" in usage.stdout


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """The top-level parser and each command's, by name ("" for the top)."""
    from ttlstate.cli.main import parser

    top = parser()
    (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return {"": top, **sub.choices}


def test_every_command_has_help_and_jar_help_is_help(capsys: pytest.CaptureFixture) -> None:
    for command in ("demo", "inspect", "jar", "migrate", "version"):
        with pytest.raises(SystemExit) as e:
            main_cli([command, "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0 and out.startswith(f"usage: ttlstate {command} ")
        assert ".jar" not in out.splitlines()[-1]  # `jar --help` no longer prints the jar's path


def test_a_misspelled_command_gets_the_closest_one(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as e:
        main_cli(["inspct", "/tmp/ck"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "unknown command 'inspct': did you mean 'inspect'?" in err


def test_every_option_shows_its_default() -> None:
    from ttlstate.cli.main import HelpFormatter

    for name, p in _parsers().items():
        formatter = HelpFormatter(p.prog)
        for action in p._actions:
            if not action.option_strings or action.nargs == 0:
                continue  # positional, or a flag (--help, --json: off unless given)
            assert "default" in (formatter._get_help_string(action) or "").lower(), (name, action.dest)


def test_help_says_what_at_durations_mean_and_cites_no_source_file() -> None:
    helps = {name: p.format_help() for name, p in _parsers().items()}
    at = " ".join(helps["inspect"].split())
    assert "'10m', '-10m', '10m ago', '10 minutes': 10 minutes before the last batch" in at
    for name, text in helps.items():
        assert not re.search(r"[\w/]+\.(py|scala|cpp|h)\b", text), (name, text)


LAST = 1_795_000_000_000  # a store's last batch time


@pytest.mark.parametrize(("text", "expected"), [
    ("last", LAST), ("now", NOW),
    ("1795459200000", 1_795_459_200_000),  # epoch ms, as Spark's batchTimestampMs
    # durations count from the last batch's time: before it, or after it with + / in
    ("10m", LAST - 600_000), ("-10m", LAST - 600_000), ("10m ago", LAST - 600_000),
    ("2h ago", LAST - 7_200_000), ("10 minutes", LAST - 600_000),
    ("+1h", LAST + 3_600_000), ("in 30s", LAST + 30_000), ("in 1.5 hours", LAST + 5_400_000),
    ("2026-11-23T18:40:00Z", int(datetime(2026, 11, 23, 18, 40, tzinfo=UTC).timestamp() * 1000)),
    ("2026-11-23T19:40:00+01:00", int(datetime(2026, 11, 23, 18, 40, tzinfo=UTC).timestamp() * 1e3)),
    ("2026-11-23 18:40", int(datetime(2026, 11, 23, 18, 40).astimezone().timestamp() * 1000)),  # local time
])
def test_at_takes_the_last_batch_durations_from_it_iso_times_and_epoch_ms(text: str, expected: int) -> None:
    assert parse_at(text, NOW).resolve(LAST, NOW) == expected


@pytest.mark.parametrize(("text", "said"), [
    ("last", "the last batch's time"), ("10m", "10m before the last batch's time"),
    ("+1h", "1h after the last batch's time"), ("now", "now (this machine's clock)"),
    ("1795459200000", "the time given with --at"),
])
def test_at_says_which_time_it_is(text: str, said: str) -> None:
    assert parse_at(text, NOW).describe() == said


def test_the_last_batch_time_falls_back_to_this_machines_clock_only_when_none_was_recorded() -> None:
    assert AtTime(offset_ms=-1000).resolve(None, NOW) == NOW - 1000


@pytest.mark.parametrize("bad", ["yesterday", "10 parsecs ago", "2026-13-01"])
def test_a_bad_at_says_what_is_allowed(bad: str) -> None:
    with pytest.raises(ValueError, match="last batch.*ISO 8601.*epoch milliseconds"):
        parse_at(bad, NOW)


def test_local_paths_and_file_uris_are_read_remote_uris_refused(tmp_path) -> None:  # noqa: ANN001
    d = str(tmp_path)
    assert local_path(d) == d
    assert local_path(f"file://{d}") == d  # file:///tmp/...
    assert local_path(f"file:{d}") == d  # file:/tmp/..., as Spark prints locations
    assert local_path(f"file://localhost{d}") == d
    for remote in ("s3a://bucket/ck", "hdfs://namenode:8020/ck", "gs://b/ck", "abfss://c@a.dfs.core.windows.net/ck",
                   "file://otherhost/ck"):
        with pytest.raises(NotATtlstateCheckpoint, match="reads local paths only"):
            local_path(remote)


def test_inspect_says_why_a_location_cannot_be_read(tmp_path, capsys) -> None:  # noqa: ANN001
    for location, says in ((str(tmp_path / "missing"), "does not exist"),
                           ("s3a://bucket/ck", "reads local paths only")):
        with pytest.raises(SystemExit) as e:
            main([location])
        assert e.value.code == 2 and says in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path), "--at", "soon"])
    assert e.value.code == 2 and "--at 'soon'" in capsys.readouterr().err


def write_metadata(state: str, op: int, name: str, version: str = "v1") -> None:
    d = os.path.join(state, str(op), "_metadata")
    if version == "v2":
        d = os.path.join(d, "v2")
    os.makedirs(d, exist_ok=True)
    info = (f'{{"operatorInfo":{{"operatorId":{op},"operatorName":"{name}"}},"stateStoreInfo":'
            '[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}')
    with open(os.path.join(d, "metadata" if version == "v1" else "3"), "w") as f:
        f.write(f"{version}\n{info}")


def test_operator_names_from_spark_state_metadata(tmp_path) -> None:  # noqa: ANN001
    state = str(tmp_path / "state")
    write_metadata(state, 0, "stateStoreSave")
    write_metadata(state, 1, "dedupe")
    write_metadata(state, 2, "transformWithStateExec", "v2")
    os.makedirs(os.path.join(state, "3", "0"))  # no metadata: left out
    assert operator_names(state) == {0: "stateStoreSave", 1: "dedupe", 2: "transformWithStateExec"}
    assert parse_operator_metadata("v1\nnot json") is None
    assert operator_names(str(tmp_path / "none")) == {}


def report(op: str, name: str | None, part: str, rows: int, expired: int | None,
           ttl: int | None) -> StoreReport:
    return StoreReport(op, part, "default", [1, 2], [], [1, 2], 100, 2, rows, expired, ttl, None, None, [],
                       name, NOW, NOW)


def test_the_table_has_operator_names_and_ttl_per_store_and_operator() -> None:
    reports = [report("0", "stateStoreSave", "0", 3, 1, 1_800_000),
               report("0", "stateStoreSave", "1", 2, 0, 1_800_000),
               report("1", "dedupe", "0", 5, None, None), report("2", None, "0", 1, 0, 60_000),
               report("2", None, "1", 1, 1, 120_000)]
    text = render(reports, AtTime())
    lines = text.splitlines()
    assert lines[0].startswith("expired rows counted at the last batch's time, 2026-")
    assert str(NOW) in lines[0]
    assert lines[1].split() == ["op", "name", "part", "store", "versions", "snapshots", "rows", "expired",
                                "ttl", "bytes"]
    assert lines[2].split()[:3] == ["0", "stateStoreSave", "0"] and lines[2].split()[-2] == "30m"
    assert lines[4].split()[:2] == ["1", "dedupe"] and lines[4].split()[-2] == "off"
    assert "  operator 0 (stateStoreSave): 2 stores, 5 rows, 1 expired, TTL 30m" in lines
    assert "  operator 1 (dedupe): 1 stores, 5 rows, - expired, TTL off" in lines
    assert "  operator 2 (name unknown): 2 stores, 2 rows, 1 expired, TTL 1m/2m" in lines
    assert [o.operator for o in operator_reports(reports)] == ["0", "1", "2"]


def test_demo_without_matplotlib_says_how_to_get_it_at_once(monkeypatch, capsys) -> None:  # noqa: ANN001
    """Before any Spark work: the message names the `demo` extra and `--no-plot`."""
    from ttlstate.demo import runner

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("the demo started without its plot"))
    assert runner.main([]) == 2
    err = capsys.readouterr().err
    assert "pip install 'ttlstate[demo]'" in err and "--no-plot" in err
    assert 'matplotlib; extra == "demo"' in (importlib.metadata.requires("ttlstate") or [])  # the extra
    ran = []
    monkeypatch.setattr(runner, "run", lambda *a, **k: ran.append(k))
    assert runner.main(["--no-plot"]) == 0 and ran == [{"plot": False, "kafka": None, "jvm_confs": {}}]


def test_jar_for_another_line_than_the_installed_one_warns(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture) -> None:
    """`ttlstate jar --spark X` prints X's jar (for a cluster's spark-defaults.conf) and says on stderr
    when X is not the installed pyspark's line: that jar fails on this Spark."""
    import pyspark

    from ttlstate.spark import configure as configure_module
    from ttlstate.spark.lines import minor_of

    monkeypatch.setattr(configure_module, "jar_path",
                        lambda spark=None: f"/jars/ttlstate-shim-spark{spark}.jar")
    installed = minor_of(pyspark.__version__)
    other = "3.5" if installed != "3.5" else "4.3"
    assert main_cli(["jar", "--spark", other]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"/jars/ttlstate-shim-spark{other}.jar"  # stdout stays the path alone: $(...)
    assert f"warning: this is the jar for Spark {other}, but the pyspark here is {pyspark.__version__}" in err
    assert "[TTLSTATE_WRONG_SPARK]" in err
    assert main_cli(["jar", "--spark", installed]) == 0
    assert capsys.readouterr().err == ""
