"""benchmarks.harness.checkpoint_fs without a JVM: which batch a checkpoint file's bytes count for."""

from __future__ import annotations

import pytest
from benchmarks.harness.checkpoint_fs import (
    bytes_per_batch,
    bytes_per_batch_by_kind,
    checkpoint_root,
    join,
    progress_start_ms,
)


def test_bytes_count_for_the_batch_whose_interval_holds_the_file() -> None:
    starts = [1000, 2000, 3000]
    seen = {"early": (1, 500), "a": (10, 1000), "b": (20, 1999), "c": (40, 2000), "maint": (80, 2500),
            "last": (160, 9000)}
    assert bytes_per_batch(seen, starts) == [1 + 10 + 20, 40 + 80, 160]
    assert bytes_per_batch(seen, []) == []


def test_progress_timestamps_are_epoch_milliseconds_in_utc() -> None:
    assert progress_start_ms({"timestamp": "1970-01-01T00:00:01.250Z"}) == 1250


def test_paths_join_for_folders_and_urls() -> None:
    assert join("hdfs://127.0.0.1:9000/benchmarks/", "v-r0", "ck") == "hdfs://127.0.0.1:9000/benchmarks/v-r0/ck"
    assert join("/tmp/x", "v-r0", "ck") == "/tmp/x/v-r0/ck"


def test_an_unknown_checkpoint_file_system_is_named() -> None:
    with pytest.raises(ValueError, match="'s3'.*local, hdfs"), checkpoint_root("s3", "/tmp"):
        pass


def test_bytes_split_by_the_files_extension() -> None:
    seen = {"hdfs://h/ck/state/0/0/1.changelog": (10, 1000), "hdfs://h/ck/state/0/0/2.snapshot": (20, 1500),
            "/ck/state/0/1/SSTs/a-b.sst": (40, 2500), "/ck/state/0/1/_metadata/schema": (80, 2600)}
    assert bytes_per_batch_by_kind(seen, [1000, 2000]) == [{"changelog": 10, "snapshot": 20},
                                                           {"sst": 40, "other": 80}]
    assert [sum(k.values()) for k in bytes_per_batch_by_kind(seen, [1000, 2000])] == \
        bytes_per_batch(seen, [1000, 2000])
