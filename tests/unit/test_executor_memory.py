"""The state server's room in an executor's container (`spark.executor.memoryOverhead`)."""

from __future__ import annotations

import pytest

from ttlstate.config import keys as K
from ttlstate.spark import configure as C
from ttlstate.spark import executor_memory as M


def test_spark_sizes_are_mib_unless_a_unit_says_otherwise() -> None:
    assert [M.spark_mib(v) for v in ("1g", "512m", "2048", "1536MiB", "4GB", "x")] == [1024, 512, 2048, 1536,
                                                                                    4096, None]


def test_the_overhead_is_sparks_default_plus_the_servers_share() -> None:
    confs: dict[str, str] = {}
    # 1g executor, one core: max(10% of 1024, 384) + 1 worker x (256 + 72) + 16
    assert M.required_overhead_mib(lambda k: None, confs) == 384 + 328 + 16
    big = {"spark.executor.memory": "8g", "spark.executor.cores": "4"}
    assert M.required_overhead_mib(big.get, confs) == 819 + 4 * 328 + 16
    assert M.required_overhead_mib(big.get, {K.WORKERS.key: "2", K.MEMORY_MAX_BYTES.key: "64m"}) == \
        819 + 2 * 136 + 16


def test_unset_it_is_set_too_low_it_is_warned_enough_it_is_kept() -> None:
    assert M.overhead_setting(lambda k: None, {}) == ("728m", None)
    value, warning = M.overhead_setting({M.OVERHEAD_KEY: "384m"}.get, {})
    assert value is None and warning is not None
    assert "spark.executor.memoryOverhead=384m leaves the state server no room" in warning
    assert "at least 728m" in warning
    assert M.overhead_setting({M.OVERHEAD_KEY: "1g"}.get, {}) == (None, None)


class FakeBuilder:
    def __init__(self, **options: str) -> None:
        self._options = dict(options)

    def config(self, key: str, value: str) -> FakeBuilder:
        self._options[key] = value
        return self


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(C, "_running_jvm", lambda: None)
    monkeypatch.setattr(C, "_active_session", lambda: None)


def test_configure_reserves_it_on_the_builder() -> None:
    opts = C.configure(FakeBuilder(**{"spark.executor.memory": "2g"}), ttl="1h",
                       memory_max_bytes="128m")._options
    assert opts[M.OVERHEAD_KEY] == f"{384 + 128 + 72 + 16}m"
    with pytest.warns(UserWarning, match="leaves the state server no room"):
        kept = C.configure(FakeBuilder(**{M.OVERHEAD_KEY: "400"}), ttl="1h")._options
    assert kept[M.OVERHEAD_KEY] == "400"


class ConnectBuilder(FakeBuilder):
    """A Spark Connect client's builder: `getOrCreate()` connects to a server whose static
    confs the session reads."""

    def __init__(self, server_confs: dict[str, str]) -> None:
        super().__init__(**{"spark.remote": "sc://localhost:15002"})
        self.server_confs = server_confs

    def getOrCreate(self) -> object:  # noqa: N802 - pyspark's name
        confs = self.server_confs

        class Conf:
            def get(self, key: str, default: str | None = None) -> str | None:
                return confs.get(key, default)

        class Session:
            conf = Conf()
        return Session()


def test_a_connect_builder_gets_the_session_confs_only() -> None:
    b = C.configure(ConnectBuilder({C.EXTENSIONS_KEY: C.EXTENSIONS_CLASS}), ttl="2s")
    assert b._options[K.PROVIDER_CLASS_KEY] == K.PROVIDER_CLASS and b._options[K.TTL.key] == "2s"
    assert not {"spark.jars", C.PLUGINS_KEY, C.EXTENSIONS_KEY, K.LOCAL_MODE_PYTHON.key,
                M.OVERHEAD_KEY} & set(b._options)


def test_a_connect_server_without_ttlstate_is_refused_in_one_line() -> None:
    with pytest.raises(C.ShimNotLoadable) as refused:
        C.configure(ConnectBuilder({}), ttl="2s")
    message = str(refused.value)
    assert "\n" not in message and "Spark Connect server runs without ttlstate" in message
    assert f"--jars $(ttlstate jar) --conf {C.EXTENSIONS_KEY}={C.EXTENSIONS_CLASS}" in message
