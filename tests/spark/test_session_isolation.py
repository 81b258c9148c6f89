"""The harness's sessions start from their own options only, as each test module assumes.

Two sessions in one fresh process (the first launches the driver JVM, as the first module of a
pytest run does): the second must not inherit the first's ttlstate or Spark confs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TWO_SESSIONS = """
import json
from tests.spark.harness import session
from ttlstate.config import keys as K

seen = []
for options, confs in (({"ttl": "5s"}, {"spark.sql.streaming.minBatchesToRetain": "7"}), ({}, {})):
    spark = session(confs=confs, **options)
    seen.append({key: spark.conf.get(key, None) for key in
                 (K.TTL.key, "spark.sql.streaming.minBatchesToRetain", K.PROVIDER_CLASS_KEY)})
    spark.stop()
print("SEEN " + json.dumps(seen))
"""


def test_a_second_session_in_the_process_does_not_inherit_the_first_ones_options() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([REPO, os.path.join(REPO, "python")])}
    out = subprocess.run([sys.executable, "-c", TWO_SESSIONS], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=600)
    line = [x for x in out.stdout.splitlines() if x.startswith("SEEN ")]
    assert out.returncode == 0 and line, out.stderr[-3000:]
    first, second = json.loads(line[0][len("SEEN "):])
    assert first["spark.sql.streaming.stateStore.ttlstate.ttl"] == "5s"
    assert first["spark.sql.streaming.minBatchesToRetain"] == "7"
    assert second["spark.sql.streaming.stateStore.ttlstate.ttl"] is None  # TTL off: not the first's 5s
    assert second["spark.sql.streaming.minBatchesToRetain"] != "7"  # Spark's default again
    provider = "spark.sql.streaming.stateStore.providerClass"
    assert second[provider] == first[provider] == "ttlstate.spark.TtlStateStoreProvider"
