"""A connection that drops mid-batch (its Spark task was interrupted: `query.stop()`, a job
group cancel, a speculative attempt's loser) ends only its own version, as an abort: the worker
goes on serving every other connection, half a frame is never applied, and nothing of the
dropped batch can be committed afterwards. The next task of the store gets exact state."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from tests.server.test_server import INFO, start_server

from ttlstate.config import keys as K
from ttlstate.server import protocol as P
from ttlstate.server.client import Client, ServerError


@pytest.fixture(params=["native", "rocksdict"])
def confs(request) -> dict[str, str]:  # noqa: ANN001
    return {K.ENGINE.key: request.param, K.TTL.key: "1h"}


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[list[str], str]]:  # noqa: ANN001
    proc, sockets = start_server(str(tmp_path / "srv"), workers=1)
    yield sockets, str(tmp_path)
    proc.kill()
    proc.wait()


def connect(socket: str) -> Client:
    c = Client(socket)
    c.hello()
    return c


def aborted(socket: str, key: str, confs: dict[str, str], ck: str, timeout_s: float = 10.0) -> bool:
    """Whether the store's current version ends up aborted, as another connection sees it (the
    worker notices a dropped connection on its own thread, so this waits, bounded)."""
    probe = connect(socket)
    h = probe.open(key, confs, INFO, ck)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                probe.get(h, b"a")
            except ServerError as e:
                if "aborted" in e.message:
                    return True
                raise
            time.sleep(0.05)
        return False
    finally:
        probe.close()


def test_a_dropped_connection_aborts_its_version_and_the_worker_serves_on(server, confs) -> None:  # noqa: ANN001
    sockets, tmp = server
    ck, other_ck = os.path.join(tmp, "ck"), os.path.join(tmp, "ck-other")
    first = connect(sockets[0])
    h = first.open("s", confs, INFO, ck)
    first.load(h, 0, 1000)
    first.writes(h, [(b"a", b"1"), (b"c", b"9")])
    assert first.commit(h)[:2] == (1, 2)
    first.close()

    # Another store of the same worker, mid-batch meanwhile.
    other = connect(sockets[0])
    ho = other.open("other", confs, INFO, other_ck)
    other.load(ho, 0, 1000)
    other.writes(ho, [(b"x", b"1")])

    # The interrupted task: version 1 loaded, pipelined writes sent, then half of a frame.
    task = connect(sockets[0])
    assert task.open("s", confs, INFO, ck) == h
    task.load(h, 1, 2000)
    task.writes(h, [(b"a", b"2"), (b"b", b"3"), (b"c", None)])
    frame = P.frame(P.OP_WRITES, P.Writer().u32(h).u32(1).u8(P.WRITE_PUT).bytes(b"d").bytes(b"4").payload())
    task.sock.sendall(frame[: len(frame) // 2])
    task.close()

    assert aborted(sockets[0], "s", confs, ck)
    # Nothing of the dropped batch can be committed by anyone.
    late = connect(sockets[0])
    assert late.open("s", confs, INFO, ck) == h
    with pytest.raises(ServerError, match="aborted"):
        late.commit(h)

    # The other connection never noticed.
    assert other.get(ho, b"x") == b"1"
    assert other.commit(ho)[:2] == (1, 1)

    # The retry of the task: exactly version 1, then its own batch.
    late.load(h, 1, 2000)
    assert late.scan(h) == [(b"a", b"1"), (b"c", b"9")]
    late.writes(h, [(b"a", b"5"), (b"e", b"6")])
    assert late.commit(h)[:2] == (2, 3)
    late.close()
    fresh = connect(sockets[0])  # a new provider of the same checkpoint: rebuilt from the files
    h2 = fresh.open("s-restored", confs, INFO, ck)
    fresh.load(h2, 2, 2000)
    assert fresh.scan(h2) == [(b"a", b"5"), (b"c", b"9"), (b"e", b"6")]
    other.close()
    fresh.close()
