"""`ttlstate.configure`: what it sets, and what it refuses."""

from __future__ import annotations

import sys

import pyspark
import pytest

from ttlstate.config import keys as K
from ttlstate.config.parse import ConfError
from ttlstate.spark import configure as C


class FakeBuilder:
    def __init__(self) -> None:
        self._options: dict[str, str] = {"spark.jars": "/x/other.jar"}

    def config(self, key: str, value: str) -> FakeBuilder:
        self._options[key] = value
        return self


def test_sets_provider_jar_interpreter_and_keys() -> None:
    b = C.configure(FakeBuilder(), ttl="30m", update_type="OnReadAndWrite", operator_ttl={2: "off"})
    opts = b._options
    assert opts[K.PROVIDER_CLASS_KEY] == K.PROVIDER_CLASS
    assert opts["spark.jars"].split(",") == ["/x/other.jar", C.jar_path()]
    assert opts[K.PYTHON.key] == sys.executable
    assert opts[K.TTL.key] == "30m" and opts[K.UPDATE_TYPE.key] == "OnReadAndWrite"
    assert opts[K.operator_ttl_key(2)] == "off"


def test_bad_values_and_unknown_options_are_refused_before_any_query() -> None:
    with pytest.raises(ConfError, match=r"ttlstate\.ttl"):
        C.configure(FakeBuilder(), ttl="forever")
    with pytest.raises(TypeError, match="unknown ttlstate option"):
        C.configure(FakeBuilder(), tll="30m")


def test_other_pyspark_versions_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pyspark, "__version__", "4.2.1")
    with pytest.raises(C.UnsupportedEnvironment, match=r"Spark 4\.3\.x.*4\.2\.1"):
        C.configure(FakeBuilder())


def test_old_python_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "MIN_PYTHON", (sys.version_info.major, sys.version_info.minor + 1))
    with pytest.raises(C.UnsupportedEnvironment, match="needs Python"):
        C.check_environment()


def test_every_conf_key_has_a_configure_option() -> None:
    by_option = set(C._OPTION_KEYS.values()) | {K.OPERATOR_TTL}  # operator_ttl={id: ttl}
    assert by_option == set(K.ALL_KEYS)
    assert all(name in C.configure.__doc__ for name in C._OPTION_KEYS)  # type: ignore[operator]
