"""Where a benchmark's rows go when it runs alone (run_all collects them itself)."""

from __future__ import annotations

import json


def save(results: list[dict[str, object]], path: str | None) -> list[dict[str, object]]:
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2)
    return results
