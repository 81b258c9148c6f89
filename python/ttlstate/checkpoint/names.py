"""File names in a store's checkpoint directory.

Checkpoint format 1: `<version>.changelog` and `<version>.snapshot`. Checkpoint format 2
(Spark's state store checkpoint ids): `<version>_<id>.changelog` and `<version>_<id>.snapshot`,
where `id` is the unique id of the attempt that committed the version, so two attempts of one
version never overwrite each other's files and Spark's commit log says which one to load.

Spark writes its own files (`_metadata/...`) into the same directory; anything that does not
match these names is ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CHANGELOG = "changelog"
SNAPSHOT = "snapshot"
_NAME = re.compile(r"^(\d+)(?:_([0-9A-Za-z-]+))?\.(changelog|snapshot)$")


@dataclass(frozen=True, order=True)
class CheckpointFile:
    version: int
    kind: str
    ckpt_id: str = ""  # format 2: the committing attempt's id; "" on format 1

    @property
    def name(self) -> str:
        return file_name(self.version, self.kind, self.ckpt_id)


def file_name(version: int, kind: str, ckpt_id: str = "") -> str:
    return f"{version}_{ckpt_id}.{kind}" if ckpt_id else f"{version}.{kind}"


def changelog_name(version: int, ckpt_id: str = "") -> str:
    return file_name(version, CHANGELOG, ckpt_id)


def snapshot_name(version: int, ckpt_id: str = "") -> str:
    return file_name(version, SNAPSHOT, ckpt_id)


def parse(name: str) -> CheckpointFile | None:
    m = _NAME.match(name)
    return CheckpointFile(int(m.group(1)), m.group(3), m.group(2) or "") if m else None


def parse_all(names: list[str]) -> list[CheckpointFile]:
    return sorted(f for f in map(parse, names) if f is not None)
