"""The keyword options of `ttlstate.configure`: Python values to conf strings, and their list.

Each option is a conf key's `option` (config/keys.py), and its key's kind says which Python
values it takes: a duration a string with its unit or a `datetime.timedelta` (a bare number is
refused: it has no unit), a bool a bool, an int or a size an int, an enum its Enum member, a
path a string or `os.PathLike`; a string always, as in a conf. The values are validated after
(store_config.py), so a bad value fails before any query starts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from datetime import timedelta

from ttlstate.config import keys as K
from ttlstate.config.conf_key import OFF_WORDS, ConfKey, Kind
from ttlstate.config.parse import format_duration_ms

OPERATOR_TTL_OPTION = K.OPERATOR_TTL.option
# Every option but operator_ttl (a dict of keys), by name.
OPTION_KEYS: dict[str, ConfKey] = {k.option: k for k in K.ALL_KEYS if k.option and "<" not in k.suffix}

# The Python values each kind takes besides a string, for messages and the docstring.
PYTHON_TYPES: dict[Kind, str] = {
    Kind.DURATION: "a datetime.timedelta", Kind.SIZE: "an int (bytes)", Kind.INT: "an int",
    Kind.NUMBER: "a float", Kind.BOOL: "a bool", Kind.ENUM: "its Enum member", Kind.PATH: "an os.PathLike",
}


def conf_value(key: ConfKey, option: str, value: object) -> str:
    """`value` of `option` (the option of `key`) as its conf string; TypeError for a Python value
    the key's kind does not take, naming the option, the value and what is allowed."""
    kind = key.kind
    if kind is Kind.DURATION:
        return duration_value(key, option, value)
    if isinstance(value, str):
        return value
    if kind is Kind.BOOL and isinstance(value, bool):
        return key.format(value)
    if kind in (Kind.INT, Kind.SIZE) and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if kind is Kind.NUMBER and isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    if kind is Kind.ENUM and key.choices is not None and isinstance(value, key.choices):
        return key.format(value)
    if kind is Kind.PATH and isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{option}={value!r}: a {type(value).__name__} is not one of its values; allowed "
                    f"{key.allowed}, as a string or {PYTHON_TYPES[kind]}")


def duration_value(key: ConfKey, option: str, value: object) -> str:
    """A duration option as a conf string: `"30m"`, a `datetime.timedelta`, or `"off"` where the
    key may be off.

    A bare number is refused here with a hint for Python (a timedelta), as the conf parser
    refuses it in any conf: it has no unit (5 seconds? 5 minutes?). Only 0 passes, where the key
    allows zero."""
    assert key.bounds is not None
    zero_ok = key.bounds[0] == 0
    if isinstance(value, bool):
        raise TypeError(f"{option}={value!r}: a bool is not a duration; allowed {key.allowed}, as a string "
                        "or a datetime.timedelta")
    if key.off and isinstance(value, str) and value.strip().lower() in OFF_WORDS:
        return "off"
    if isinstance(value, timedelta):
        ms, rest = divmod(value, timedelta(milliseconds=1))
        if rest or ms < 0 or (ms == 0 and not zero_ok):
            raise ValueError(f"{option}={value!r}: a timedelta for ttlstate must be a positive whole "
                             "number of milliseconds")
        return format_duration_ms(ms)
    number = ((isinstance(value, (int, float)) and math.isfinite(value))
              or (isinstance(value, str) and value.strip().isdigit()))
    if number and float(value) == 0 and not zero_ok:  # type: ignore[arg-type]
        raise ValueError(f"{option}={value!r}: 0 is not a duration of this option; allowed {key.allowed}")
    if number and float(value) != 0:  # type: ignore[arg-type]
        n = float(value)  # type: ignore[arg-type]
        example = (f'{option}="{int(n)}s" or "{int(n)}m"' if n.is_integer()
                   else f'{option}="{round(n * 1000)}ms"')
        raise ValueError(f"{option}={value!r} has no unit: write it with one, e.g. {example} or "
                         "\"5 seconds\" (units ms, s, m, h, d, w, or Spark's interval words), or pass "
                         "a datetime.timedelta")
    if not isinstance(value, str) and not number:
        raise TypeError(f"{option}={value!r}: a {type(value).__name__} is not a duration; allowed "
                        f"{key.allowed}, as a string or a datetime.timedelta")
    return "0" if number else str(value)


def operator_ttl_confs(value: object) -> dict[str, str]:
    """`operator_ttl={1: "10m", "dedupe": timedelta(hours=1), "stateStoreSave": "off"}`: by id
    (an int, or digits) or by the name progress shows (`operatorName`)."""
    if not isinstance(value, Mapping):
        raise TypeError(f"{OPERATOR_TTL_OPTION} must be a dict of operator id or name -> TTL, e.g. "
                        f"{{\"dedupe\": \"1h\", 2: \"off\"}}, not {type(value).__name__}")
    confs = {}
    for op, ttl in value.items():
        if isinstance(op, bool) or not isinstance(op, (int, str)):
            raise TypeError(f"{OPERATOR_TTL_OPTION}: {op!r} is neither an operator id nor a name")
        op_key = int(op) if isinstance(op, int) or op.strip().isdigit() else op.strip()
        if isinstance(op_key, int) and op_key < 0:
            raise ValueError(f"{OPERATOR_TTL_OPTION}: operator ids are >= 0, not {op}")
        confs[K.operator_ttl_key(op_key)] = conf_value(K.OPERATOR_TTL, f"{OPERATOR_TTL_OPTION}[{op!r}]",
                                                       "off" if ttl is None else ttl)
    return confs


def options_doc(indent: str = "    ") -> str:
    """One line per option: its name, what it takes, and the Python values it also takes."""
    lines = [f"{indent}{name}: {key.allowed} (or {PYTHON_TYPES[key.kind]})"
             for name, key in OPTION_KEYS.items()]
    lines.append(f"{indent}{OPERATOR_TTL_OPTION}: a dict of operator id or name (as progress shows it) to a "
                 f"TTL as for ttl, e.g. {{\"dedupe\": \"10m\", 2: \"off\"}}")
    return "\n".join(lines)
