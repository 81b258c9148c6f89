"""What the state server logs for each store it opens: which store, and its TTL in effect with
the key it comes from, or why TTL does not apply to it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace

import pytest

from ttlstate.config import keys as K
from ttlstate.config.store_config import store_config_from_confs
from ttlstate.server import store_log
from ttlstate.server.store_log import describe_store, log_store_opened, operator_names, why_no_ttl

LONG = json.dumps({"type": "struct", "fields": [{"name": "value", "type": "long"}]})
VOID = json.dumps({"type": "struct", "fields": [{"name": "key", "type": "void"}]})


def info(**extra: object) -> dict[str, object]:
    return {"operatorId": 1, "partitionId": 3, "storeName": "default", "keySchema": "{}",
            "valueSchema": "{}", "operatorName": "dedupe",
            "operatorNames": {"0": "stateStoreSave", "1": "dedupe"}, **extra}


def test_a_store_with_ttl_names_operator_store_ttl_and_its_key() -> None:
    i = info()
    cfg = store_config_from_confs({K.TTL.key: "1h", K.operator_ttl_key("dedupe"): "90s",
                                   K.UPDATE_TYPE.key: "OnReadAndWrite"}, 1, operator_names(i))
    line = describe_store(i, cfg, True)
    assert line.startswith("store opened: operator 1 (dedupe), partition 3, store default: TTL 90s "
                           "(operator.dedupe.ttl), OnReadAndWrite, NeverReturnExpired, time batchTimestamp")
    assert "cleanup incremental 1000 per commit, compaction filter, full snapshot" in line
    assert line.endswith("engine native")


def test_ttl_off_and_stores_where_ttl_does_not_apply() -> None:
    off = describe_store(info(), store_config_from_confs({}, 1), True)
    assert "TTL off (ttl=off)" in off
    id_off = store_config_from_confs({K.TTL.key: "1h", K.operator_ttl_key(1): "off"}, 1)
    by_id = describe_store(info(), id_off, True)
    assert "TTL off (operator.1.ttl=off)" in by_id
    join = info(operatorName="symmetricHashJoin", storeName="left-keyToNumValues")
    on = store_config_from_confs({K.TTL.key: "1h"}, 1)
    line = describe_store(join, replace(on, ttl=on.ttl.disabled()), why_no_ttl(join) is None)
    assert "store left-keyToNumValues: no TTL: a stream-stream join store" in line
    limit = info(operatorName="globalLimit", keySchema=VOID, valueSchema=LONG)
    assert "no TTL: the store of a streaming limit" in describe_store(limit, store_config_from_confs({}, 1),
                                                                      why_no_ttl(limit) is None)
    unnamed = describe_store({"operatorId": 4, "partitionId": 0, "storeName": "default"},
                             store_config_from_confs({}, 4), True)
    assert unnamed.startswith("store opened: operator 4, partition 0")


def test_operator_names_from_the_open_info() -> None:
    assert operator_names(info()) == {0: "stateStoreSave", 1: "dedupe"}
    assert operator_names({"operatorId": 1}) is None
    assert operator_names({"operatorNames": {"x": "a", "2": "b"}}) == {2: "b"}


@pytest.fixture
def restore_levels() -> Iterator[None]:
    loggers = [logging.getLogger(), store_log.lifecycle]
    saved = [lg.level for lg in loggers]
    yield
    for lg, level in zip(loggers, saved, strict=True):
        lg.setLevel(level)  # setLevel also clears the loggers' enabled-for caches


def test_store_lines_follow_the_executor_log_level_unless_the_env_sets_one(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, restore_levels: None) -> None:
    """By default a store's line is logged when the shim says the executor logs at INFO
    (`logInfo`), so a local session's console is not flooded; TTLSTATE_LOG_LEVEL overrides."""
    cfg = store_config_from_confs({K.TTL.key: "1h"}, 1)
    root = logging.getLogger()
    caplog.set_level(logging.NOTSET)  # capture everything that passes the loggers' own levels
    root.setLevel(logging.WARNING)  # a server without TTLSTATE_LOG_LEVEL
    monkeypatch.delenv(store_log.LEVEL_ENV, raising=False)
    store_log.lifecycle.setLevel(logging.INFO)
    log_store_opened(info(logInfo="false"), cfg)
    assert not caplog.records
    log_store_opened(info(logInfo="true"), cfg)
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "operator 1 (dedupe)" in caplog.records[0].getMessage()
    caplog.clear()
    # TTLSTATE_LOG_LEVEL=INFO: every line, whatever the executor's level.
    monkeypatch.setenv(store_log.LEVEL_ENV, "INFO")
    store_log.lifecycle.setLevel(logging.NOTSET)
    root.setLevel(logging.INFO)
    log_store_opened(info(logInfo="false"), cfg)
    assert len(caplog.records) == 1
    caplog.clear()
    # TTLSTATE_LOG_LEVEL=warning: none.
    monkeypatch.setenv(store_log.LEVEL_ENV, "warning")
    root.setLevel(logging.WARNING)
    log_store_opened(info(logInfo="true"), cfg)
    assert not caplog.records
