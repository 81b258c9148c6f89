"""The grammar of Spark-style conf values: durations, sizes, integers, booleans, enum names.

Every parser raises `ConfError` naming the key, the offending value and what is allowed,
because a bad value must fail the query at start with a message a user can act on. A key's
bounds and its allowed text are its ConfKey's (conf_key.py), which calls these.
"""

from __future__ import annotations

import re
from enum import Enum
from fractions import Fraction
from typing import TypeVar

from ttlstate.errors import ConfigurationError

INT64_MAX = (1 << 63) - 1

E = TypeVar("E", bound=Enum)


class ConfError(ConfigurationError):
    """A conf value that is not allowed; the message names key, value and what is allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"Invalid value {value!r} for conf '{key}': allowed {allowed}")


class UnknownConfKey(ConfError):
    """A key under ttlstate's prefix that ttlstate does not know (a typo must not mean "default");
    the message names the closest known key."""

    def __init__(self, key: str, value: object, known: list[str]) -> None:
        import difflib

        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        self.suggestion = close[0] if close else None
        hint = (f"did you mean '{self.suggestion}'?" if self.suggestion
                else "see the configuration reference, docs/configuration.md")
        ValueError.__init__(self, f"Unknown ttlstate conf '{key}' (set to {value!r}): {hint}")
        self.key, self.value, self.allowed = key, value, "a known ttlstate key"


# Duration units in microseconds: ttlstate's and Spark's conf suffixes (`500ms`, `30m`, `1h`) and the
# unit words of Spark's interval strings (`withWatermark`, triggers: `10 seconds`, `1 hour`), in
# the singular and the plural. The shim parses the durations it reads with the same table
# (generated for Scala by ttlstate.codegen) and the same grammar (ConfValues.scala).
UNIT_US = {
    "us": 1, "micros": 1, "microsecond": 1, "microseconds": 1,
    "ms": 1000, "millis": 1000, "millisecond": 1000, "milliseconds": 1000,
    "s": 1_000_000, "sec": 1_000_000, "secs": 1_000_000, "second": 1_000_000, "seconds": 1_000_000,
    "m": 60_000_000, "min": 60_000_000, "mins": 60_000_000, "minute": 60_000_000, "minutes": 60_000_000,
    "h": 3_600_000_000, "hour": 3_600_000_000, "hours": 3_600_000_000,
    "d": 86_400_000_000, "day": 86_400_000_000, "days": 86_400_000_000,
    "w": 604_800_000_000, "week": 604_800_000_000, "weeks": 604_800_000_000,
}
# Spark's interval words that are not a fixed length of time.
CALENDAR_UNITS = ("month", "months", "year", "years")
# One `<number> <unit>` term of a duration: ASCII only, so every language reads it alike.
_SPACE = " \t\n\r\f\x0b"
_TERM_RE = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t\n\r\f\x0b]*([a-z]*)")
# How durations are written, added to the message of a value that is not one.
DURATION_SYNTAX = ("units ms, s, m/min, h, d, w and their names, singular or plural; or as Spark writes "
                   "intervals: '10 seconds', 'interval 1 hour 30 minutes'")
DURATION_ALLOWED = (
    "a duration with its unit, such as 500ms, 10s, 30m, 1.5h, 2d, or as Spark writes intervals: "
    "'10 seconds', '5 minutes', 'interval 1 hour 30 minutes' (units ms, s, m/min, h, d, w and "
    "their names, singular or plural)"
)


def parse_duration_ms(key: str, value: str, *, allow_zero: bool = False,
                      allowed: str = DURATION_ALLOWED) -> int:
    """Parse `30m`, `1.5h`, `500ms`, `10 seconds` or `interval 1 hour 30 minutes` into
    milliseconds (rounded down, as Spark turns an interval into milliseconds), clamped to int64.

    A bare number is refused (only `0` where `allow_zero`): `5` would otherwise silently be
    5 ms for a TTL meant as 5 s or 5 min. The message names the key, the value and a fix."""
    if not str(value).isascii():
        raise ConfError(key, value, allowed)
    text = str(value).strip(_SPACE).lower()
    if text.startswith("interval") and text[8:9] in tuple(_SPACE):
        text = text[8:].strip(_SPACE)
    terms, pos = [], 0
    while pos < len(text):
        m = _TERM_RE.match(text, pos)
        if m is None:
            raise ConfError(key, value, allowed)
        terms.append(m.groups())
        pos = m.end()
        while pos < len(text) and text[pos] in _SPACE:
            pos += 1
    if not terms:
        raise ConfError(key, value, allowed)
    if len(terms) == 1 and not terms[0][2]:
        number = terms[0][1]
        if allow_zero and Fraction(number) == 0 and terms[0][0] != "-":
            return 0
        whole = number.rstrip("0").rstrip(".") if "." in number else number
        raise ConfError(key, value, f"{allowed}; a bare number has no unit: write '{whole}s', "
                                    f"'{whole}m' or '{whole}ms'")
    total = Fraction(0)
    for sign, number, unit in terms:
        if unit in CALENDAR_UNITS:
            raise ConfError(key, value, f"{allowed}; a {unit.rstrip('s')} has no fixed length: write "
                                        "days, such as '30 days'")
        if unit not in UNIT_US:
            import difflib

            close = difflib.get_close_matches(unit, list(UNIT_US), n=1, cutoff=0.6)
            hint = f"; unit {unit!r} is not one" + (f" (did you mean {close[0]!r}?)" if close else "")
            raise ConfError(key, value, allowed + (hint if unit else ""))
        if sign == "-":
            raise ConfError(key, value, f"{allowed}; a duration is not negative")
        total += Fraction(number) * UNIT_US[unit]
    ms = int(total // 1000)
    if ms == 0 and not allow_zero:
        raise ConfError(key, value, f"{allowed}; at least 1ms")
    return min(ms, INT64_MAX)


def format_duration_ms(ms: int | None) -> str:
    """`off` for None, else the largest unit that divides it: 1800000 -> `30m`, 1500 -> `1500ms`."""
    if ms is None:
        return "off"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


UNIT_BYTES = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
              "g": 1 << 30, "gb": 1 << 30}
_SIZE_RE = re.compile(r"([0-9]+)[ \t\n\r\f\x0b]*([a-z]*)")
_INT_RE = re.compile(r"[+-]?[0-9]+")
SIZE_ALLOWED = "a size in bytes, or with a unit (k, m, g): 64m, 1g"


def strip_space(value: object) -> str:
    """`value` as text without the ASCII blanks around it (the shim strips the same ones)."""
    return str(value).strip(_SPACE)


def parse_bytes(key: str, value: str, *, allowed: str = SIZE_ALLOWED) -> int:
    """Parse `256m` / `1g` / `65536` (Spark's binary units, ASCII only) into bytes, at most int64."""
    m = _SIZE_RE.fullmatch(strip_space(value).lower()) if str(value).isascii() else None
    if not m or m.group(2) not in UNIT_BYTES:
        raise ConfError(key, value, allowed)
    n = int(m.group(1)) * UNIT_BYTES[m.group(2)]
    if n > INT64_MAX:
        raise ConfError(key, value, allowed)
    return n


def format_bytes(n: int) -> str:
    """The largest unit that divides it: 16777216 -> `16m`, 1000 -> `1000`."""
    for unit in ("g", "m", "k"):
        if n >= UNIT_BYTES[unit] and n % UNIT_BYTES[unit] == 0:
            return f"{n // UNIT_BYTES[unit]}{unit}"
    return str(n)


def parse_number(key: str, value: str, *, allowed: str) -> float:
    try:
        return float(strip_space(value))
    except ValueError:
        raise ConfError(key, value, allowed) from None


def parse_bool(key: str, value: str, *, allowed: str = "true or false") -> bool:
    v = strip_space(value).lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise ConfError(key, value, allowed)


def parse_int(key: str, value: str, *, allowed: str) -> int:
    """An ASCII integer (`+5`, `-3`; not `1_000`, `5.0` or other scripts' digits, which the shim's
    parser would not take either), however large: the key's bounds are checked by its caller."""
    text = strip_space(value)
    if not str(value).isascii() or not _INT_RE.fullmatch(text):
        raise ConfError(key, value, allowed)
    return int(text)


def parse_enum(key: str, value: str, enum_type: type[E], *, allowed: str) -> E:
    """Enum names are matched case-insensitively, as Spark does for its own enum confs."""
    wanted = strip_space(value).lower()
    for member in enum_type:
        if member.value.lower() == wanted:
            return member
    raise ConfError(key, value, allowed)
