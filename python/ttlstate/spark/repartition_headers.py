"""The headers of the files `ttlstate repartition` moves, read before anything changes: what
each store's file of the version to move recorded (its TTL settings, batch time and key count),
each header's fields checked as ttlstate writes them, and a damaged file named as damaged rather
than taken for TTL settings that differ between partitions. Only the headers are read (the job
reads the files themselves on the executors, verified whole), but for the files of a store whose
partitions' headers disagree, which are verified whole here. What is wrong is raised as the
plan's Refused.
"""

from __future__ import annotations

import os
import tempfile

from ttlstate.checkpoint import names
from ttlstate.checkpoint.record_file import (
    KIND_CHANGELOG,
    KIND_SNAPSHOT,
    RecordFileError,
    header_bytes_needed,
    header_of,
    intact_length,
    verify_record_file,
)
from ttlstate.spark import repartition_plan as RP
from ttlstate.spark.checkpoint_fs import CheckpointFs


def header(fs: CheckpointFs, folder: str, version: int, ckpt_id: str = "") -> tuple[str, dict] | None:
    """The store's file of `version` (its changelog, else its snapshot; on checkpoint format 2
    those of `ckpt_id`) and its header."""
    for name in (names.changelog_name(version, ckpt_id), names.snapshot_name(version, ckpt_id)):
        path = f"{folder}/{name}"
        if not fs.exists(path):
            continue
        head = fs.read(path, 4096)
        try:
            if len(head) < header_bytes_needed(head):
                head = fs.read(path, header_bytes_needed(head))
            meta = header_of(head)[1]
        except (RecordFileError, ValueError) as e:
            raise RP.Refused(f"{fs.root}/{path} {e}") from None
        problem = RP.header_problem(meta)
        if problem is not None:
            raise RP.Refused(f"{fs.root}/{path} is damaged: its header's {problem}; the checkpoint "
                                   "is unchanged")
        return path, meta
    return None


def _damage(fs: CheckpointFs, path: str) -> str | None:
    """What is wrong with the record file `path`, verified whole (size, end marker, checksum) as a
    load verifies it (bytes appended after its end aside); None when it is intact."""
    kind = KIND_CHANGELOG if path.endswith(".changelog") else KIND_SNAPSHOT
    with tempfile.TemporaryDirectory(prefix="ttlstate-repartition-") as tmp:
        local = os.path.join(tmp, os.path.basename(path))
        fs.fetch(path, local)
        end = intact_length(local)
        if end is not None:
            os.truncate(local, end)
        try:
            verify_record_file(local, kind)
        except RecordFileError as e:
            return str(e)
    return None


def check_differing_settings(fs: CheckpointFs, files: dict[int, tuple[str, dict]]) -> None:
    """The files of one store's partitions whose headers record different TTL settings, each
    verified whole: a damaged one is named as damaged (the plan would take it for settings that
    differ). Only then: verifying every file would read the whole state on the driver."""
    if len({RP.settings_text(h) for _, h in files.values()}) < 2:
        return
    for path, meta in files.values():
        what = _damage(fs, path)
        if what is not None:
            raise RP.Refused(f"{fs.root}/{path} is damaged: it {what}, so the TTL settings its header "
                                   f"records ({RP.settings_text(meta)}) cannot be trusted; the checkpoint "
                                   "is unchanged")
