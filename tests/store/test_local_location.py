"""LocalCheckpointLocation: a `file:` checkpoint folder as the state server reads and writes it
itself, next to files Hadoop's local file system wrote (their `.crc` checksums)."""

from __future__ import annotations

import os

import pytest

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.store_config import StoreConfig
from ttlstate.server.registry import _location
from ttlstate.server.remote_checkpoint import RemoteCheckpointLocation


def _local_file(tmp_path: os.PathLike[str], content: bytes) -> str:
    path = os.path.join(tmp_path, "staged")
    with open(path, "wb") as f:
        f.write(content)
    return path


def test_nothing_is_created_before_the_first_publish(tmp_path: os.PathLike[str]) -> None:
    folder = os.path.join(tmp_path, "state", "0", "1")
    loc = LocalCheckpointLocation(folder)
    assert loc.list_files() == []
    assert not os.path.exists(folder)
    loc.publish(_local_file(tmp_path, b"one"), "1.changelog")
    assert loc.list_files() == ["1.changelog"]


def test_hidden_files_are_not_listed(tmp_path: os.PathLike[str]) -> None:
    for name in ("1.changelog", ".1.changelog.crc", ".2.changelog.abc.tmp"):
        with open(os.path.join(tmp_path, name), "wb") as f:
            f.write(b"x")
    os.mkdir(os.path.join(tmp_path, "sst"))
    assert LocalCheckpointLocation(str(tmp_path)).list_files() == ["1.changelog"]


def test_publish_replaces_atomically_and_drops_hadoops_stale_checksum(tmp_path: os.PathLike[str]) -> None:
    folder = os.path.join(tmp_path, "ck")
    os.mkdir(folder)
    for name, content in (("1.changelog", b"old"), (".1.changelog.crc", b"checksum of old")):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(content)
    loc = LocalCheckpointLocation(folder)
    loc.publish(_local_file(tmp_path, b"new"), "1.changelog")
    assert sorted(os.listdir(folder)) == ["1.changelog"]  # no checksum, no temporary file
    with open(os.path.join(folder, "1.changelog"), "rb") as f:
        assert f.read() == b"new"
    fetched = os.path.join(tmp_path, "fetched")
    loc.fetch("1.changelog", fetched)
    with open(fetched, "rb") as f:
        assert f.read() == b"new"


def test_a_failed_publish_leaves_the_old_file_and_no_temporary(tmp_path: os.PathLike[str]) -> None:
    folder = os.path.join(tmp_path, "ck")
    loc = LocalCheckpointLocation(folder)
    loc.publish(_local_file(tmp_path, b"old"), "1.changelog")
    with pytest.raises(FileNotFoundError):
        loc.publish(os.path.join(tmp_path, "missing"), "1.changelog")
    assert os.listdir(folder) == ["1.changelog"]


def test_fetch_of_a_missing_file_names_it(tmp_path: os.PathLike[str]) -> None:
    loc = LocalCheckpointLocation(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="checkpoint file .*/7.changelog does not exist"):
        loc.fetch("7.changelog", os.path.join(tmp_path, "out"))


def test_delete_takes_the_checksum_too(tmp_path: os.PathLike[str]) -> None:
    for name in ("1.changelog", ".1.changelog.crc", "2.changelog"):
        with open(os.path.join(tmp_path, name), "wb") as f:
            f.write(b"x")
    loc = LocalCheckpointLocation(str(tmp_path))
    loc.delete(["1.changelog", "3.changelog"])  # a missing one is no error
    assert sorted(os.listdir(tmp_path)) == ["2.changelog"]


@pytest.mark.parametrize(("info", "allowed", "local"), [
    ({"checkpointDir": "file:/ck/state/0/1", "localCheckpointDir": "/ck/state/0/1"}, True, True),
    ({"checkpointDir": "file:/ck/state/0/1", "localCheckpointDir": "/ck/state/0/1"}, False, False),
    ({"checkpointDir": "hdfs://nn/ck/state/0/1"}, True, False),
])
def test_the_server_reads_directly_only_where_the_shim_found_a_local_folder_and_the_conf_allows(
        info: dict[str, object], allowed: bool, local: bool) -> None:
    loc = _location(info, StoreConfig(checkpoint_local_files=allowed))
    assert isinstance(loc, LocalCheckpointLocation if local else RemoteCheckpointLocation)
    if local:
        assert loc.describe("1.changelog") == "/ck/state/0/1/1.changelog"


def test_a_published_file_has_the_umasks_mode_as_any_file(tmp_path: os.PathLike[str]) -> None:
    old = os.umask(0o022)
    try:
        LocalCheckpointLocation(str(tmp_path)).publish(_local_file(tmp_path, b"x"), "1.changelog")
    finally:
        os.umask(old)
    assert os.stat(os.path.join(tmp_path, "1.changelog")).st_mode & 0o777 == 0o644
