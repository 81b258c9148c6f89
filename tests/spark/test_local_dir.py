"""Where the state server keeps its files (issue 11.5): under Spark's own local dir for the
executor (here `spark.local.dir`), in a private directory; when that path is too deep for a
Unix socket (the JVM's limit: 106 bytes on Java 17), only the sockets go to a short private
directory of their own, and both are gone when the application ends."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile

import pytest

from tests.spark.harness import TTLSTATE, is_worker, our_server_processes, poll_until, run_steps, session

pytestmark = pytest.mark.spark

SCHEMA = {"events": "k STRING, v INT"}
STEPS = [[{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}],
         [{"k": "b", "v": 4}, {"k": "c", "v": 5}]]
SOCKETS = ["w0.sock", "w1.sock"]  # local[2]: two workers


def _arg(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


@pytest.mark.parametrize("depth", ["short", "deep"])
def test_state_lives_under_spark_local_dir_and_deep_dirs_move_only_the_sockets(tmp_path, depth: str) -> None:  # noqa: ANN001
    assert not {"SPARK_LOCAL_DIRS", "SPARK_EXECUTOR_DIRS"} & set(os.environ), \
        "Spark lets these override spark.local.dir"
    # short: a folder right under the system's temp dir (pytest's tmp_path is deep enough under
    # pytest-xdist that its sockets would move); deep: past the socket limit wherever tmp_path is
    short = tempfile.mkdtemp(prefix="ttlstate-ld-")
    try:
        _check_local_dir(tmp_path, depth, os.path.join(short, "local"))
    finally:
        shutil.rmtree(short, ignore_errors=True)


def _check_local_dir(tmp_path, depth: str, short_local: str) -> None:  # noqa: ANN001
    local = short_local if depth == "short" else tmp_path / ("l" * 60) / ("d" * 60)
    spark = session(confs={"spark.local.dir": str(local)})
    try:
        run = run_steps(spark, TTLSTATE, lambda s: s["events"].dropDuplicates(["k"]), SCHEMA, STEPS)
        assert [sorted(r[0] for r in rows) for _, rows in sorted(run.outputs.items())] == [["a", "b"], ["c"]]
        [(supervisor, cmd)] = [(p, c) for p, c in our_server_processes() if not is_worker(p)]
        root, socket_dir = _arg(cmd, "--root"), _arg(cmd, "--socket-dir")
        assert root is not None and os.path.dirname(root) == os.path.realpath(local), (root, local)
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
        stores = [d for w in os.listdir(root) if os.path.isdir(os.path.join(root, w))
                  for d in os.listdir(os.path.join(root, w))]
        assert stores, f"no local stores under {root}"
        if depth == "short":
            assert socket_dir is None
            assert sorted(n for n in os.listdir(root) if n.endswith(".sock")) == SOCKETS
        else:
            assert len(f"{root}/w1.sock") > 107, root
            assert socket_dir is not None and len(f"{socket_dir}/w1.sock") <= 107, socket_dir
            assert stat.S_IMODE(os.stat(socket_dir).st_mode) == 0o700
            assert sorted(os.listdir(socket_dir)) == SOCKETS
            assert not [n for n in os.listdir(root) if n.endswith(".sock")]
    finally:
        spark.stop()
    assert poll_until(lambda: not our_server_processes(), 30), our_server_processes()
    assert poll_until(lambda: not [d for d in (root, socket_dir) if d and os.path.exists(d)], 30)
