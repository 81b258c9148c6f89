"""The native connection loop: per-entry requests of a bound store are answered without calling
Python; everything else reaches the control plane's handler, in order; errors keep the protocol."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from ttlstate import _native
from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.config.keys import EngineKind
from ttlstate.config.store_config import StoreConfig, TtlConfig
from ttlstate.server import protocol as P
from ttlstate.store.provider import StoreProvider
from ttlstate.ttl.clock import ManualClock

H = 7  # the handle the tests bind


class Peer:
    """The shim's side of a socketpair, speaking frames."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb")
        self.loaded = None  # the store version the last LOAD bound

    def send(self, code: int, w: P.Writer) -> None:
        self.sock.sendall(P.frame(code, w.payload()))

    def call(self, code: int, w: P.Writer) -> tuple[int, P.Reader]:
        self.send(code, w)
        got = P.read_frame(self.rfile)
        assert got is not None
        return got[0], P.Reader(got[1])


@pytest.fixture
def served(tmp_path) -> Iterator[tuple[Peer, list[int], StoreProvider, _native.Connection]]:  # noqa: ANN001
    ttl = TtlConfig(ttl_ms=100)
    provider = StoreProvider("op=0,part=0,store=default", str(tmp_path / "local"),
                             LocalCheckpointLocation(str(tmp_path / "ck")),
                             StoreConfig(ttl, EngineKind.NATIVE), ManualClock(0))
    ours, theirs = socket.socketpair()
    conn = _native.Connection(ours.fileno())
    forwarded: list[int] = []

    def handler(code: int, payload: bytes) -> tuple[int, bytes] | None:
        forwarded.append(code)
        if code == P.OP_WRITES:
            return P.RESP_ERROR, P.Writer().u16(P.ERR_STATE).str("python says no").payload()
        if code == P.OP_LOAD:
            r = P.Reader(payload)
            _h, version, now, read_only = r.u32(), r.i64(), r.i64(), r.u8()
            store = provider.get_store(version, now_ms=now, read_only=bool(read_only))
            conn.bind(H, store.txn)
            peer.loaded = store
        return P.RESP_OK, b"control"

    peer = Peer(theirs)
    thread = threading.Thread(target=conn.serve, args=(handler,), daemon=True)
    thread.start()
    yield peer, forwarded, provider, conn
    peer.rfile.close()  # the socket closes when its file object does too
    theirs.close()
    thread.join(10)
    assert not thread.is_alive(), "the native loop did not end when the peer closed"
    ours.close()
    provider.close()


def test_hot_requests_never_reach_python(served) -> None:  # noqa: ANN001
    peer, forwarded, _provider, conn = served
    code, r = peer.call(P.OP_LOAD, P.Writer().u32(H).i64(0).i64(1000).u8(0))
    assert (code, r.buf) == (P.RESP_OK, b"control") and forwarded == [P.OP_LOAD]
    puts = P.Writer().u32(H).u32(3)
    for k in (b"a", b"b", b"c"):
        puts.u8(P.WRITE_PUT).bytes(k).bytes(k.upper())
    peer.send(P.OP_WRITES, puts)
    peer.send(P.OP_WRITES, P.Writer().u32(H).u32(1).u8(P.WRITE_REMOVE).bytes(b"b"))
    code, r = peer.call(P.OP_GET, P.Writer().u32(H).bytes(b"a"))
    assert (code, r.bytes_or_none()) == (P.RESP_OK, b"A")
    code, r = peer.call(P.OP_MULTI_GET, P.Writer().u32(H).u32(3).bytes(b"a").bytes(b"b").bytes(b"zz"))
    assert code == P.RESP_OK and [r.bytes_or_none() for _ in range(r.u32())] == [b"A", None, None]
    code, r = peer.call(P.OP_GET_ENTRIES, P.Writer().u32(H).u32(3).bytes(b"c").bytes(b"b").bytes(b"a"))
    assert code == P.RESP_OK and r.u32() == 3
    got = [(r.bytes_or_none(), r.i64()) for _ in range(3)]
    assert [v for v, _ts in got] == [b"C", None, b"A"] and got[1][1] == 0
    code, r = peer.call(P.OP_ITER, P.Writer().u32(H).bytes(None))
    assert code == P.RESP_OK
    _iter_id, done, n = r.u32(), r.u8(), r.u32()
    assert done == 1 and [(r.bytes(), r.bytes()) for _ in range(n)] == [(b"a", b"A"), (b"c", b"C")]
    assert forwarded == [P.OP_LOAD], "a per-entry request of a bound store went through Python"
    assert conn.native_requests >= 4  # counted after the reply is sent


def test_unbound_handles_and_control_frames_go_to_python_in_order(served) -> None:  # noqa: ANN001
    peer, forwarded, _provider, _conn = served
    assert peer.call(P.OP_GET, P.Writer().u32(99).bytes(b"a"))[0] == P.RESP_OK  # not bound: Python
    peer.send(P.OP_WRITES, P.Writer().u32(99).u32(0))  # Python fails it: owed to the next call
    code, r = peer.call(P.OP_METRICS, P.Writer().u32(99))
    assert code == P.RESP_ERROR and r.u16() == P.ERR_STATE and "python says no" in r.str()
    assert peer.call(P.OP_METRICS, P.Writer().u32(99))[0] == P.RESP_OK  # reported once
    assert forwarded == [P.OP_GET, P.OP_WRITES, P.OP_METRICS]


def test_native_errors_keep_the_connection_usable(served) -> None:  # noqa: ANN001
    peer, _forwarded, _provider, _conn = served
    peer.call(P.OP_LOAD, P.Writer().u32(H).i64(0).i64(1000).u8(1))  # read-only
    peer.send(P.OP_WRITES, P.Writer().u32(H).u32(1).u8(P.WRITE_PUT).bytes(b"k").bytes(b"v"))
    code, r = peer.call(P.OP_GET, P.Writer().u32(H).bytes(b"k"))
    assert code == P.RESP_ERROR and r.u16() == P.ERR_STATE
    assert "earlier pipelined write failed" in (msg := r.str()) and "read-only" in msg, msg
    code, r = peer.call(P.OP_GET, P.Writer().u32(H).u8(1))  # malformed: too short
    assert code == P.RESP_ERROR and r.u16() == P.ERR_BAD_REQUEST
    code, r = peer.call(P.OP_GET, P.Writer().u32(H).bytes(b"k"))
    assert (code, r.bytes_or_none()) == (P.RESP_OK, None)


def test_every_write_kind_keeps_the_key_count_exact(served) -> None:  # noqa: ANN001
    """The shim's proofs (absent: key filter; present: a live cached entry) replace the commit's
    lookup; a plain put or remove is looked up. Either way numRowsTotal counts what is stored."""
    peer, _forwarded, provider, _conn = served
    peer.call(P.OP_LOAD, P.Writer().u32(H).i64(0).i64(10).u8(0))
    w = P.Writer().u32(H).u32(3)
    for k in (b"a", b"b", b"c"):
        w.u8(P.WRITE_PUT_NEW).bytes(k).bytes(b"v")
    peer.send(P.OP_WRITES, w)
    assert peer.call(P.OP_GET, P.Writer().u32(H).bytes(b"a"))[0] == P.RESP_OK  # writes applied
    provider.commit_store(peer.loaded)
    assert provider.num_keys == 3
    peer.call(P.OP_LOAD, P.Writer().u32(H).i64(1).i64(20).u8(0))
    w = P.Writer().u32(H).u32(5)
    w.u8(P.WRITE_PUT_PRESENT).bytes(b"a").bytes(b"v2")   # present: no lookup, no change
    w.u8(P.WRITE_PUT).bytes(b"b").bytes(b"v2")           # looked up: present, no change
    w.u8(P.WRITE_PUT).bytes(b"d").bytes(b"v")            # looked up: absent, +1
    w.u8(P.WRITE_PUT_NEW).bytes(b"e").bytes(b"v")        # proved absent, +1
    w.u8(P.WRITE_REMOVE).bytes(b"c")                     # looked up: present, -1
    peer.send(P.OP_WRITES, w)
    code, r = peer.call(P.OP_GET, P.Writer().u32(H).bytes(b"a"))
    assert (code, r.bytes_or_none()) == (P.RESP_OK, b"v2")
    provider.commit_store(peer.loaded)
    assert provider.num_keys == 4 == provider.engine.count_keys()
