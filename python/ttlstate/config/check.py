"""`python -m ttlstate.config.check`: validates the ttlstate confs given as a JSON object on stdin
with the rules the state server applies (store_config.py). Exit 0: valid; exit 2: invalid, the
message on stdout. The shim runs it on the driver when a query starts (StartChecks.scala), so a
bad value fails `start()` instead of the first batch with data, whichever way the confs were set."""

from __future__ import annotations

import json
import sys

from ttlstate.config.parse import ConfError
from ttlstate.config.store_config import store_config_from_confs


def main() -> int:
    confs = json.loads(sys.stdin.read() or "{}")
    try:
        store_config_from_confs({str(k): str(v) for k, v in confs.items()})
    except ConfError as e:
        print(str(e))
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
