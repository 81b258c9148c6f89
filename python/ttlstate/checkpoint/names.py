"""File names in a store's checkpoint directory: `<version>.changelog` and `<version>.snapshot`.

Spark writes its own files (`_metadata/...`) into the same directory; anything that does not
match these names is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHANGELOG = "changelog"
SNAPSHOT = "snapshot"
_NAME = re.compile(r"^(\d+)\.(changelog|snapshot)$")


@dataclass(frozen=True, order=True)
class CheckpointFile:
    version: int
    kind: str

    @property
    def name(self) -> str:
        return f"{self.version}.{self.kind}"


def changelog_name(version: int) -> str:
    return f"{version}.{CHANGELOG}"


def snapshot_name(version: int) -> str:
    return f"{version}.{SNAPSHOT}"


def parse(name: str) -> CheckpointFile | None:
    m = _NAME.match(name)
    return CheckpointFile(int(m.group(1)), m.group(2)) if m else None


def parse_all(names: list[str]) -> list[CheckpointFile]:
    return sorted(f for f in map(parse, names) if f is not None)
