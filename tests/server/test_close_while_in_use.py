"""Spark closes a provider from its maintenance thread when the coordinator names another
executor as the store's active one, which after a lost executor happens while a task of the
stage's earlier attempt still works on the store here. The close then waits for that task's
version to end (as Spark's RocksDB provider's close waits for its instance's lock): the task
commits, and the store closes after it. A store opened again meanwhile stays open."""

from __future__ import annotations

import os
import time

from tests.server.test_dropped_connection import confs, connect, server  # noqa: F401
from tests.server.test_server import INFO

from ttlstate.server import protocol as P
from ttlstate.server.client import Client


def _first_version(socket: str, confs: dict[str, str], ck: str) -> int:  # noqa: F811
    c = connect(socket)
    h = c.open("s", confs, INFO, ck)
    c.load(h, 0, 1000)
    c.writes(h, [(b"a", b"1")])
    assert c.commit(h)[:2] == (1, 1)
    c.close()
    return h


def _closed_mid_batch(socket: str, confs: dict[str, str], ck: str) -> tuple[int, Client, Client]:  # noqa: F811
    """(the store's handle, a task's connection with version 1 open and one write sent, the
    maintenance connection that closed the store meanwhile)."""
    h = _first_version(socket, confs, ck)
    task = connect(socket)
    assert task.open("s", confs, INFO, ck) == h
    task.load(h, 1, 2000)
    task.writes(h, [(b"b", b"2")])
    maintenance = connect(socket)
    assert maintenance.open("s", confs, INFO, ck) == h
    maintenance.simple(P.OP_CLOSE, h)  # the coordinator named another executor
    return h, task, maintenance


def test_a_close_waits_for_the_task_that_has_a_version_open(server, confs) -> None:  # noqa: ANN001, F811
    sockets, tmp = server
    ck = os.path.join(tmp, "ck")
    h, task, maintenance = _closed_mid_batch(sockets[0], confs, ck)
    task.writes(h, [(b"c", b"3")])
    assert task.get(h, b"a") == b"1"
    assert task.commit(h)[:2] == (2, 3)  # was: "version 1 is closed; no further operations are allowed"
    task.close()
    after = connect(sockets[0])
    again = after.open("s", confs, INFO, ck)
    assert again != h  # closed once the task's version ended: opened anew
    after.load(again, 2, 3000)
    assert dict(after.entries(again)).keys() == {b"a", b"b", b"c"}
    after.close()
    maintenance.close()


def _store_dirs(root: str, handle: int) -> list[str]:
    """The worker's local folders of the store opened as `handle` (the registry's `<handle>-s`)."""
    return [d for d, _subdirs, _files in os.walk(root) if os.path.basename(d) == f"{handle}-s"]


def test_a_close_waiting_for_a_dropped_task_happens_when_it_drops(server, confs) -> None:  # noqa: ANN001, F811
    sockets, tmp = server
    ck = os.path.join(tmp, "ck")
    h, task, maintenance = _closed_mid_batch(sockets[0], confs, ck)
    assert _store_dirs(os.path.join(tmp, "srv"), h)  # still open: the task's version is
    task.close()  # the task was killed: its version is aborted, and the store closes
    deadline = time.monotonic() + 10  # the worker notices the drop on the connection's own thread
    while _store_dirs(os.path.join(tmp, "srv"), h) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _store_dirs(os.path.join(tmp, "srv"), h)
    probe = connect(sockets[0])
    reopened = probe.open("s", confs, INFO, ck)
    assert reopened != h
    probe.load(reopened, 1, 2000)
    assert dict(probe.entries(reopened)).keys() == {b"a"}  # nothing of the dropped batch
    probe.close()
    maintenance.close()


def test_a_store_opened_again_while_its_close_waits_stays_open(server, confs) -> None:  # noqa: ANN001, F811
    sockets, tmp = server
    ck = os.path.join(tmp, "ck")
    h, task, maintenance = _closed_mid_batch(sockets[0], confs, ck)
    nxt = connect(sockets[0])
    assert nxt.open("s", confs, INFO, ck) == h  # this executor's next task: the close is off
    assert task.commit(h)[:2] == (2, 2)
    task.close()
    assert _store_dirs(os.path.join(tmp, "srv"), h)
    nxt.load(h, 2, 3000)
    assert dict(nxt.entries(h)).keys() == {b"a", b"b"}
    nxt.close()
    maintenance.close()
