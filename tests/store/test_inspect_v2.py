"""`ttlstate inspect` on checkpoint format 2: the attempt Spark's commit log names is rebuilt."""

from __future__ import annotations

import json
import os

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.cli.inspect_checkpoint import main
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock


def test_inspect_rebuilds_the_committed_attempt(tmp_path, capsys) -> None:  # noqa: ANN001
    ck = tmp_path / "query"
    store_dir = ck / "state" / "0" / "0"

    def provider(local: str) -> StoreProvider:
        return StoreProvider("op=0,part=0,store=default", str(tmp_path / local),
                             LocalCheckpointLocation(str(store_dir)),
                             StoreConfig(engine=EngineKind.ROCKSDICT), ManualClock(0), checkpoint_ids=True)

    p = provider("a")
    s = p.get_store(0, now_ms=1000)
    s.put(b"k1", b"v")
    s.commit()
    base = p.last_commit_ids[0]
    ids = {}
    for attempt, rows in (("short", 1), ("long", 3)):  # two attempts of version 2
        q = provider(attempt)
        s = q.get_store(1, now_ms=1000, ckpt_id=base)
        for i in range(rows):
            s.put(b"x%d" % i, b"v")
        s.commit()
        ids[attempt] = q.last_commit_ids[0]
        q.close()
    p.close()
    os.makedirs(ck / "commits")
    with open(ck / "commits" / "1", "w") as f:
        f.write("v2\n" + json.dumps({"nextBatchWatermarkMs": 0,
                                     "stateUniqueIds": {"0": [[ids["long"]]]}}) + "\n")
    assert main([str(ck), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["stores"][0]
    assert (report["latest_version"], report["rows"], report["problems"]) == (2, 4, [])
