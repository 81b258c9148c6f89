"""Memory per pending write: a batch's puts held by each data plane before commit.

One process per data plane (so their allocations do not mix): N puts of `key_bytes` keys and
`value_bytes` values into one store version, resident memory measured before and after, and
the difference divided by N. What it shows: the native plane keeps a pending write as its key
and TtlValue in an arena, a 32-byte record and a slot of an open-addressing index (C++), the
Python reference plane in a dict of bytes objects.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from benchmarks.harness.output import save

CHILD = r"""
import gc, json, os, sys, tempfile, psutil
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock
engine, n, kb, vb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
root = tempfile.mkdtemp()
p = StoreProvider("op=0,part=0,store=default", root + "/local", LocalCheckpointLocation(root + "/ck"),
                  StoreConfig(TtlConfig(ttl_ms=3_600_000), EngineKind(engine)), ManualClock(0))
s = p.get_store(0, now_ms=1)
value = b"v" * vb
gc.collect()
before = psutil.Process().memory_info().rss
for i in range(n):
    s.put(b"%0*d" % (kb, i), value)
gc.collect()
after = psutil.Process().memory_info().rss
print(json.dumps({"engine": engine, "pending_writes": n, "key_bytes": kb, "value_bytes": vb,
                  "rss_growth_mb": round((after - before) / 2**20, 1),
                  "bytes_per_pending_write": round((after - before) / n, 1)}))
"""


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--writes", type=int, default=1_000_000)
    ap.add_argument("--key-bytes", type=int, default=24)
    ap.add_argument("--value-bytes", type=int, default=48)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    results = []
    for engine in ("native", "rocksdict"):
        out = subprocess.run([sys.executable, "-c", CHILD, engine, str(args.writes), str(args.key_bytes),
                              str(args.value_bytes)], capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(results[-1], flush=True)
    return save(results, args.json)


if __name__ == "__main__":
    main()
