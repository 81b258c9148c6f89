"""Hypothesis strategies over every conf key, from its kind and bounds (config/conf_key.py): typed
values a key takes, and conf strings around its bounds in every spelling the parsers know (and
many they refuse), for the round-trip and the cross-language property tests."""

from __future__ import annotations

from hypothesis import strategies as st

from ttlstate.config.conf_key import INTEGRAL, OFF_WORDS, ConfKey, Kind
from ttlstate.config.parse import INT64_MAX, UNIT_BYTES, UNIT_US

# Blanks both parsers strip, and characters that look like digits, units or blanks but are not
# ASCII (other scripts' digits, the Kelvin sign that lower-cases to k, a no-break space).
BLANKS = ["", " ", "  ", "\t", "\x0b", "\x0c"]
LOOKALIKES = ["\u0665", "\u212a", "\u00a0", "\x01", "\uff15"]


def typed_values(key: ConfKey) -> st.SearchStrategy[object]:
    """Values `key.parse` returns: within the bounds, None where the key may be off."""
    kind = key.kind
    if kind is Kind.BOOL:
        values: st.SearchStrategy[object] = st.booleans()
    elif kind is Kind.ENUM:
        assert key.choices is not None
        values = st.sampled_from(list(key.choices))
    elif kind is Kind.PATH:
        values = st.text(st.characters(blacklist_categories=("Cs",)))
    elif kind is Kind.NUMBER:
        assert key.bounds is not None
        values = st.floats(key.bounds[0], key.bounds[1], exclude_min=key.exclusive, exclude_max=key.exclusive,
                           allow_nan=False)
    else:
        assert key.bounds is not None
        low, high = key.bounds
        values = st.one_of(st.integers(low, high), st.sampled_from([low, high]),
                           st.integers(low, min(high, max(low, 0) + 10**7)))
    return st.one_of(values, st.none()) if key.off else values


def _case(text: str, draw: st.DrawFn) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in text)


@st.composite
def _spelled(draw: st.DrawFn, key: ConfKey, n: int) -> str:
    """`n` (in the key's unit, possibly out of bounds or negative) written as a conf might write it."""
    sign = "-" if n < 0 else draw(st.sampled_from(["", "", "+"]))
    n = abs(n)
    if key.kind is Kind.INT:
        return sign + str(n)
    if key.kind is Kind.SIZE:
        units = [u for u, size in UNIT_BYTES.items() if n % size == 0]
        unit = draw(st.sampled_from(units))
        return sign + str(n // UNIT_BYTES[unit]) + draw(st.sampled_from(BLANKS[:3])) + _case(unit, draw)
    us = n * 1000
    units = [u for u, size in UNIT_US.items() if us % size == 0]
    unit = draw(st.sampled_from(units))
    number = str(us // UNIT_US[unit])
    if draw(st.integers(0, 4)) == 0 and UNIT_US[unit] >= 1000:  # the same amount as a decimal
        number += "." + "0" * draw(st.integers(0, 2))
    prefix = draw(st.sampled_from(["", "", "interval ", "INTERVAL\t"]))
    return prefix + sign + number + draw(st.sampled_from(BLANKS[:3])) + _case(unit, draw)


def near_bounds(key: ConfKey) -> list[int]:
    """Values (in the key's unit) at, just inside and just outside its bounds, and a few usual ones."""
    assert key.bounds is not None
    low, high = key.bounds
    near = [low - 1, low, low + 1, high - 1, high, 0, 1, -1, 1000, 60_000]
    return near + [high + 1] if high < INT64_MAX else near


def spellings(key: ConfKey, n: int) -> list[str]:
    """Every way to write `n` (in the key's unit) with one unit, and bare."""
    sign = "-" if n < 0 else ""
    ms_units = {u: size // 1000 for u, size in UNIT_US.items() if size >= 1000}
    table = {Kind.SIZE: UNIT_BYTES, Kind.DURATION: ms_units}.get(key.kind, {})
    out = [f"{sign}{abs(n)}", f"+{n}" if n >= 0 else f"{n}"]
    out += [f"{sign}{abs(n) // size}{unit}" for unit, size in table.items() if size and abs(n) % size == 0]
    return out


@st.composite
def conf_texts(draw: st.DrawFn, key: ConfKey) -> str:
    """A conf string for an integral key (duration, size, int): near its bounds, spelled in any
    unit, off words, bare numbers, and strings that are almost values."""
    assert key.kind in INTEGRAL
    near = near_bounds(key)
    pick = draw(st.integers(0, 3))  # mostly at the bounds, where a difference would be
    n = draw(st.sampled_from(near) if pick < 2 else st.integers(-(10**6), 10**10) if pick == 2
             else st.integers(0, 2**70))
    form = draw(st.integers(0, 9))
    if form <= 5:
        text = draw(_spelled(key, n))
    elif form == 6:
        text = str(n)  # a bare number
    elif form == 7:
        text = _case(draw(st.sampled_from(OFF_WORDS + ("of", "offf", "no"))), draw)
    elif form == 8:
        text = draw(st.sampled_from(["1_000", "5.0", "1e3", "0x10", "--5", "5 5", "1.5g", "m", "5 parsecs",
                                     "1 month", "1h30m", "1 hour -30 minutes", "0.0", ".5h", "5.", "0.1ms"]))
    else:
        alphabet = st.sampled_from(list("0123456789 .+-_smhdwkgbinterval") + LOOKALIKES)
        text = "".join(draw(st.lists(alphabet, max_size=12)))
    return draw(st.sampled_from(BLANKS)) + text + draw(st.sampled_from(BLANKS))
