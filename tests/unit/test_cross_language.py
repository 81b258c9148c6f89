"""Protocol constants, conf keys and metric names: Python's single definitions vs the shim's."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conf_strategies import conf_texts, near_bounds, spellings
from tests.jvm_hooks import HookSession, run_hook, spark_jars

from ttlstate.config import keys as K
from ttlstate.config.conf_key import INTEGRAL
from ttlstate.config.parse import ConfError
from ttlstate.server import protocol as P
from ttlstate.store.metric_names import ALL_METRICS


@pytest.fixture(scope="module")
def scala() -> dict:
    assert glob.glob(os.path.join(spark_jars(), "spark-sql_*.jar"))
    return json.loads(run_hook("Constants"))


def test_protocol_constants_match(scala: dict) -> None:
    assert scala["protocol"] == P.constants()


def test_native_protocol_constants_match() -> None:
    """The native data plane parses and answers frames itself: its constants are Python's."""
    from ttlstate import _native
    from ttlstate.checkpoint.record_file import FORMAT_VERSION

    native = _native.protocol_constants()
    assert native == P.constants()
    assert _native.RECORD_FORMAT_VERSION == FORMAT_VERSION


@pytest.mark.parametrize("prefix", ["OP_", "WRITE_", "LOAD_", "KEY_HASHES_", "RESP_", "CB_"])
def test_protocol_numbers_are_unique_within_their_kind(prefix: str) -> None:
    """Two branches may each add a request or write kind: after their merge no number means two
    things (a LOAD_ flag is a bit: distinct too; CB_ERR_ kinds are their own set)."""
    numbers = {k: v for k, v in P.constants().items()
               if k.startswith(prefix) and not k.startswith("CB_ERR_")}
    assert numbers and len(set(numbers.values())) == len(numbers), numbers


def test_conf_keys_match(scala: dict) -> None:
    assert scala["confPrefix"] == K.PREFIX
    assert scala["confSuffixes"] == [k.suffix for k in K.ALL_KEYS]


def test_every_keys_kind_bounds_default_and_allowed_text_match(scala: dict) -> None:
    """The shim's ConfKeys.Spec of every key, as the compiled jar holds it, is Python's ConfKey."""
    from ttlstate.codegen.facts import conf_spec

    python = [{**conf_spec(k), "bounds": list(k.bounds) if k.bounds else None} for k in K.ALL_KEYS]
    assert scala["confSpecs"] == python
    assert scala["offWords"] == list(K.OFF_WORDS)


def test_metric_names_and_kinds_match(scala: dict) -> None:
    assert scala["metrics"] == {m.name: m.kind for m in ALL_METRICS}


# Metric names Spark's stateful operators already put into the same SQLMetric map (4.3.0): a
# custom metric with one of these names would be summed into Spark's own metric.
SPARK_OPERATOR_METRICS = {
    "numOutputRows", "numRowsDroppedByWatermark", "numTotalStateRows", "numUpdatedStateRows",
    "allUpdatesTimeMs", "numRemovedStateRows", "allRemovalsTimeMs", "commitTimeMs", "stateMemory",
    "numStateStoreInstances", "numShufflePartitions", "numDroppedDuplicateRows",
    "numRowsReadDuringEviction", "numRowsIncrementallyRemoved", "numValuesRemovedDueToTTLExpiry",
}


def test_only_num_removed_state_rows_shares_a_spark_operator_metric() -> None:
    """Sharing the name is summing into Spark's metric: wanted for numRemovedStateRows (TTL
    removals are removals: progress's numRowsRemoved), a corruption for any other."""
    from ttlstate.store.metric_names import NUM_REMOVED_STATE_ROWS

    assert {m.name for m in ALL_METRICS} & SPARK_OPERATOR_METRICS == {NUM_REMOVED_STATE_ROWS.name}
    assert NUM_REMOVED_STATE_ROWS.kind == "sum"  # Spark's own is a sum metric too


def test_expiry_rule_is_the_same_in_scala_python_and_cpp() -> None:
    """The shim's cache applies TTL itself: its rule must be Flink's, as Python's and C++'s are,
    on generated cases plus the inclusive boundary, the overflow clamp and negative times."""
    import random

    from ttlstate import _native
    from ttlstate.ttl.expiry import is_expired

    rnd = random.Random(20261123)
    big = 2**63 - 1

    def num(lo: int) -> int:  # small, epoch-millisecond-like and extreme magnitudes
        scale = rnd.choice([10**3, 2 * 10**12, 2**62, big])
        return max(lo, min(big, rnd.randint(-scale, scale)))

    cases = []
    for _ in range(1000):
        ts, ttl = num(-(2**63)), num(1)
        now = rnd.choice([num(-(2**63)), min(big, ts + ttl), min(big, ts + ttl) - 1])
        cases.append((ts, ttl, max(-(2**63), now)))
    cases += [(1000, 100, 1100), (1000, 100, 1099), (big - 5, 100, big), (big - 5, 100, big - 1),
              (-5, big, big), (0, 1, 1), (big, big, big), (-(2**63), 1, -(2**63) + 1)]
    out = run_hook("ExpiryCases", stdin="".join(f"{t} {ttl} {now}\n" for t, ttl, now in cases))
    scala = [line == "1" for line in out.split()]
    python = [is_expired(*c) for c in cases]
    native = [_native.is_expired(*c) for c in cases]
    assert scala == python == native


def test_key_filter_hashes_are_the_same_in_scala_and_cpp() -> None:
    """A restore fills the shim's key filter from hashes the server computes natively: a hash
    that differed would be a false negative (a read answered "absent" for a key the store has).
    Generated keys of every length around the 4-byte blocks, plus the empty key."""
    import random

    from ttlstate import _native

    rnd = random.Random(20261124)
    keys = [b""] + [rnd.randbytes(n) for n in range(1, 13)] + [rnd.randbytes(rnd.randint(0, 300))
                                                             for _ in range(500)]
    out = run_hook("KeyHashes", stdin="".join(f"{k.hex()}\n" for k in keys))
    scala = [tuple(int(h) & 0xFFFFFFFF for h in line.split()) for line in out.splitlines()]
    assert scala == [_native.key_hashes(k) for k in keys]


def test_the_key_filter_first_layer_is_sized_alike_in_scala_and_python() -> None:
    """After a restore the server keeps the bits of the shim's first filter layer, sized by
    Python's rule: a layer the shim sized larger could not be had from them (the shim would
    scan every key back itself), one sized smaller would waste the server's memory."""
    from ttlstate.store.key_filter_layout import first_layer_bits_log2

    counts = [0, 1, 2, 8191, 8192, 8193, 16384, 26213, 26215, 10**6, 12_500_000, 2**31 - 1, 2**31, 10**10]
    out = run_hook("KeyFilterFirstLayer", stdin="".join(f"{n}\n" for n in counts))
    assert [int(line) for line in out.splitlines()] == [first_layer_bits_log2(n) for n in counts]


def test_column_family_key_prefixes_are_the_same_in_scala_and_python() -> None:
    """A served transformWithState store's keys are the shim's, behind each family's name: the
    server reads the family of a key by Python's layout, so the two must agree byte for byte
    (names of every UTF-8 width, the empty name, the longest allowed and one byte too long)."""
    from ttlstate.store.column_families import family_prefix, split_key

    names = ["default", "$timestamps_1", "$ttl_values", "", "é", "値", "🙂x", "a" * P.FAMILY_NAME_MAX_BYTES,
             "a" * (P.FAMILY_NAME_MAX_BYTES + 1)]
    out = run_hook("FamilyPrefixCases", stdin="".join(f"{n}\n" for n in names)).splitlines()
    python = []
    for name in names:
        try:
            python.append(family_prefix(name).hex())
        except ValueError:
            python.append("-")
    assert out == python and python[-1] == "-" and python[0] == "0007" + b"default".hex()
    assert split_key(family_prefix("値") + b"\x01\x02") == ("値", b"\x01\x02")


def test_conf_values_the_shim_reads_are_parsed_as_python_parses_them() -> None:
    """Sizes and durations (the units are generated from Python's tables, the parsers are one per
    language): the same generated values through both. Durations in every form Python takes
    (ttlstate's `1.5h`, Spark's `10 seconds` and `interval 1 hour 30 minutes`, several terms)
    and forms it refuses (bare numbers, negatives, months, unknown units, zero)."""
    import random

    from ttlstate.config.parse import CALENDAR_UNITS, UNIT_US, parse_bytes, parse_duration_ms

    rnd = random.Random(20261124)
    size_units = ["", "b", "k", "kb", "m", "mb", "g", "gb", "t", "ms", "s", "Kb", "x"]
    duration_units = [*UNIT_US, *CALENDAR_UNITS, "", "M", "Seconds", "HOURS", "x", "secondss", "hr"]
    cases = []
    for _ in range(400):
        digits = rnd.randint(1, 20)
        n = str(rnd.randint(0, 10**digits - 1))
        cases.append(("size", rnd.choice(["", " "]) + n + rnd.choice(["", " "]) + rnd.choice(size_units)))

    def number() -> str:
        whole = str(rnd.randint(0, 10 ** rnd.randint(1, 22)))
        form = rnd.random()
        if form < 0.6:
            return whole
        fraction = str(rnd.randint(0, 10 ** rnd.randint(1, 8)))
        return f"{whole}.{fraction}" if form < 0.85 else (f".{fraction}" if form < 0.95 else f"{whole}.")

    for _ in range(800):
        terms = [rnd.choice(["", "", "", "+", "-"]) + number() + rnd.choice(["", " ", "  ", "\t"])
                 + rnd.choice(duration_units) for _ in range(rnd.choice([1, 1, 1, 2, 3]))]
        text = rnd.choice(["", " ", "\t"]).join(terms) if rnd.random() < 0.2 else " ".join(terms)
        prefix = rnd.choice(["", "", "", "interval ", "INTERVAL  ", "Interval\t", "interval"])
        cases.append(("duration", rnd.choice(["", " "]) + prefix + text + rnd.choice(["", " "])))
    cases += [("size", "1.5g"), ("size", "-1m"), ("size", "")]
    cases += [("duration", v) for v in (
        "5", "m5", "", "0s", "0", "5 seconds", "10 minutes", "1 hour", "1.5h", "interval 5 minutes",
        "1 hour 30 minutes", "1h30m", "1 hour, 30 minutes", "1500 microseconds", "999 us", "1.0005 seconds",
        "interval", "interval5 minutes", "1 month", "2 years", "-5s", "+5s", "1 hour -30 minutes",
        "99999999999999999999999 days", ".5h", "5. s", "5 m s", "\u0665s", "5 \u212aeeks", "1e3 seconds")]

    def python(kind: str, value: str) -> str:
        try:
            parsed = parse_bytes("k", value) if kind == "size" else parse_duration_ms("k", value)
        except ConfError:
            return "-"
        return str(parsed)

    out = run_hook("ConfValueCases", stdin="".join(f"{kind}|{value}\n" for kind, value in cases))
    expected = [python(*c) for c in cases]
    kinds = [c[0] for c in cases]
    assert sum(e != "-" for k, e in zip(kinds, expected, strict=True) if k == "duration") > 200
    assert out.split("\n")[:-1] == expected


# The keys whose values are numbers in a unit: the shim reads its own with the same generic reader.
INTEGRAL_KEYS = [k for k in K.ALL_KEYS if k.kind in INTEGRAL and "<" not in k.suffix]


@pytest.fixture(scope="module")
def key_cases() -> Iterator[HookSession]:
    with HookSession("ConfKeyCases") as hook:
        yield hook


def _python_reads(key: K.ConfKey, text: str) -> str:
    """What the hook answers when the shim reads `text` as Python does: the value (or off, or "-"
    when it is not one), then what the shim uses (the key's default for "-"; -1 for off)."""
    try:
        value = key.parse(text)
        read = "off" if value is None else str(value)
    except ConfError:
        read = "-"
    default = key.parse(key.default)
    used = ("-1" if default is None else str(default)) if read == "-" else "-1" if read == "off" else read
    return f"{read}|{used}"


def test_the_shim_and_python_take_the_same_values_at_every_keys_bounds(key_cases: HookSession) -> None:
    """Each number key at, inside and outside its bounds, in every unit that writes it exactly."""
    cases = [(key, text) for key in INTEGRAL_KEYS for n in near_bounds(key) for text in spellings(key, n)]
    assert len(cases) > 300
    answers = [key_cases.ask(f"{key.key}|{text}") for key, text in cases]
    assert answers == [_python_reads(key, text) for key, text in cases]


@pytest.mark.parametrize("key", INTEGRAL_KEYS, ids=[k.suffix for k in INTEGRAL_KEYS])
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_the_shim_reads_every_number_key_as_python_does(key_cases: HookSession, key: K.ConfKey,
                                                      data: st.DataObject) -> None:
    """Durations, sizes and ints near each key's bounds, in every unit and spelling (and strings
    that are almost values): the shim takes exactly the values Python takes, as the same number
    (or off), and falls back to the key's default for the others."""
    text = data.draw(conf_texts(key))
    assert key_cases.ask(f"{key.key}|{text}") == _python_reads(key, text), (key.suffix, text)
