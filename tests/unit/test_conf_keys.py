"""Every key's kind and bounds (config/conf_key.py) as properties: its values round-trip through
format and parse, what it refuses names the key, the value and the allowed text, and its
default is one of its values."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conf_strategies import conf_texts, typed_values

from ttlstate.config import keys as K
from ttlstate.config.conf_key import INTEGRAL, ConfKey, Kind
from ttlstate.config.parse import ConfError

NAMED = [k for k in K.ALL_KEYS if "<" not in k.suffix]
INTEGRAL_KEYS = [k for k in K.ALL_KEYS if k.kind in INTEGRAL]
ids = [k.suffix for k in K.ALL_KEYS]


@pytest.mark.parametrize("key", K.ALL_KEYS, ids=ids)
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_every_keys_values_round_trip_through_format_and_parse(key: ConfKey, data: st.DataObject) -> None:
    value = data.draw(typed_values(key))
    text = key.format(value)
    assert key.parse(text) == value, text


@pytest.mark.parametrize("key", INTEGRAL_KEYS, ids=[k.suffix for k in INTEGRAL_KEYS])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_what_an_integral_key_takes_formats_back_to_itself(key: ConfKey, data: st.DataObject) -> None:
    """Any conf string the key takes (any unit, case, blanks, Spark's interval words) parses to a
    value that formats to a string parsing to the same value, within the bounds."""
    text = data.draw(conf_texts(key))
    try:
        value = key.parse(text)
    except ConfError as e:
        assert e.key == key.key and e.value == text and key.allowed in e.allowed
        return
    assert value is None or key.within(value)
    assert key.parse(key.format(value)) == value


@pytest.mark.parametrize("key", [k for k in INTEGRAL_KEYS + [K.MEMORY_WRITE_BUFFER_RATIO] if k.bounds],
                         ids=lambda k: k.suffix)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_value_outside_the_bounds_is_refused_naming_key_value_and_allowed(key: ConfKey,
                                                                           data: st.DataObject) -> None:
    assert key.bounds is not None
    low, high = key.bounds
    below = data.draw(st.integers(max(0, low - 10**6), low - 1)) if low > 0 else None
    above = data.draw(st.integers(high + 1, high + 10**6)) if high < (1 << 62) else None
    if key.exclusive:
        below, above = low, high
    for n in (v for v in (below, above) if v is not None):
        text = key.format(n) if key.kind is not Kind.NUMBER else str(n)
        with pytest.raises(ConfError) as e:
            key.parse(text)
        message = str(e.value)
        assert key.key in message and repr(text) in message and f"allowed {key.allowed}" in message


@pytest.mark.parametrize("key", NAMED, ids=[k.suffix for k in NAMED])
def test_every_default_is_one_of_the_keys_values(key: ConfKey) -> None:
    value = key.parse(key.default)
    if key.kind is Kind.PATH:
        assert value == ""
    elif value is not None:
        assert key.format(value) == key.default or key.parse(key.format(value)) == value


def test_off_is_a_value_only_of_the_keys_that_may_be_off() -> None:
    for key in INTEGRAL_KEYS:
        if key.off:
            assert all(key.parse(w) is None for w in ("off", " OFF ", "none", ""))
        else:
            with pytest.raises(ConfError):
                key.parse("off")
