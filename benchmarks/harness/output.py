"""Where a benchmark's rows go when it runs alone (run_all collects them itself)."""

from __future__ import annotations

import json


def save(results: list[dict[str, object]], path: str | None) -> list[dict[str, object]]:
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2)
    return results


def report(result: dict[str, object], shown: tuple[str, ...], path: str | None) -> dict[str, object]:
    """A workload's result: its `shown` fields printed as one JSON line, the whole saved to `path`."""
    print(json.dumps({k: result[k] for k in shown}), flush=True)
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
    return result
