"""Parsers for Spark-style conf values.

Every parser raises `ConfError` naming the key, the offending value and what is allowed,
because a bad value must fail the query at start with a message a user can act on.
"""

from __future__ import annotations

import re
from enum import Enum
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


# Duration units and size units; the shim parses the confs it reads with the same tables
# (generated for Scala by ttlstate.codegen).
UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "sec": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_DURATION_RE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")
DURATION_ALLOWED = (
    "a duration with its unit, such as 500ms, 10s, 30m, 1h, 2d (units ms, s, m/min, h, d); "
    "a bare number is refused: it has no unit"
)


def parse_duration_ms(key: str, value: str, *, allow_zero: bool = False,
                      allowed: str = DURATION_ALLOWED) -> int:
    """Parse `30m` / `1h` / `500ms` into milliseconds, clamped to int64.

    A bare number is refused (only `0` where `allow_zero`): `5` would otherwise silently be
    5 ms for a TTL meant as 5 s or 5 min. The message names the key, the value and a fix."""
    m = _DURATION_RE.match(str(value).lower())
    if m is None:
        raise ConfError(key, value, allowed)
    n, unit = int(m.group(1)), m.group(2)
    if not unit:
        if allow_zero and n == 0:
            return 0
        raise ConfError(key, value, f"{allowed}; write '{n}s', '{n}m' or '{n}ms'")
    if unit not in UNIT_MS or (n == 0 and not allow_zero):
        raise ConfError(key, value, allowed)
    return min(n * UNIT_MS[unit], INT64_MAX)


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


def parse_bytes(key: str, value: str, *, minimum: int) -> int:
    """Parse `256m` / `1g` / `65536` (Spark's binary units) into bytes, at least `minimum`."""
    allowed = (f"a size such as 64m, 512m, 2g (units b, k, m, g; a bare number is bytes), "
               f"at least {minimum}")
    m = _DURATION_RE.match(str(value).lower())
    if not m or m.group(2) not in UNIT_BYTES:
        raise ConfError(key, value, allowed)
    n = int(m.group(1)) * UNIT_BYTES[m.group(2)]
    if not minimum <= n <= INT64_MAX:
        raise ConfError(key, value, allowed)
    return n


def parse_fraction(key: str, value: str) -> float:
    """A number strictly between 0 and 1."""
    try:
        f = float(str(value).strip())
    except ValueError:
        f = -1.0
    if not 0.0 < f < 1.0:
        raise ConfError(key, value, "a number strictly between 0 and 1, such as 0.5")
    return f


def parse_bool(key: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise ConfError(key, value, "true or false")


def parse_int(key: str, value: str, *, minimum: int, maximum: int = INT64_MAX) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ConfError(key, value, f"an integer in [{minimum}, {maximum}]") from None
    if not minimum <= n <= maximum:
        raise ConfError(key, value, f"an integer in [{minimum}, {maximum}]")
    return n


def parse_enum(key: str, value: str, enum_type: type[E]) -> E:
    """Enum names are matched case-insensitively, as Spark does for its own enum confs."""
    wanted = str(value).strip().lower()
    for member in enum_type:
        if member.value.lower() == wanted:
            return member
    allowed = ", ".join(m.value for m in enum_type)
    raise ConfError(key, value, f"one of {allowed} (case-insensitive)")
