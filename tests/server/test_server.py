"""The state server as the shim sees it: protocol, errors, permissions, lifecycle, no orphans."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from ttlstate import faults
from ttlstate.config import keys as K
from ttlstate.server import protocol as P
from ttlstate.server.client import Client, ServerError
from ttlstate.server.worker_processes import WORKER_NAME
from ttlstate.ttl import ttl_value

CONFS = {K.ENGINE.key: "rocksdict", K.TTL.key: "100ms"}


@pytest.fixture(params=["native", "rocksdict"])
def confs(request) -> dict[str, str]:  # noqa: ANN001
    """The data path on both data planes: native answers per-entry requests without Python."""
    return {K.ENGINE.key: request.param, K.TTL.key: "100ms"}
INFO = {"operatorId": 0, "partitionId": 0, "storeName": "default", "storeId": "op=0,part=0"}


def start_server(root: str, workers: int = 2) -> tuple[subprocess.Popen, list[str]]:
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.server", "--root", root,
                             "--workers", str(workers)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().split()  # type: ignore[union-attr]
    assert line and line[0] == "READY", line
    entries = [e.split("@", 1) for e in line[1:]]  # <pid>@<socket>, one per worker
    assert sorted(int(pid) for pid, _ in entries) == sorted(p.pid for p in _children(proc))
    return proc, [sock for _, sock in entries]


@pytest.fixture
def server(tmp_path) -> Iterator[tuple[subprocess.Popen, list[str], str]]:  # noqa: ANN001
    proc, sockets = start_server(str(tmp_path / "srv"))
    yield proc, sockets, str(tmp_path)
    proc.kill()
    proc.wait()


def _children(proc: subprocess.Popen) -> list[psutil.Process]:
    return psutil.Process(proc.pid).children(recursive=True)


def test_store_round_trip_with_callbacks_and_ttl(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    assert c.hello() == P.PROTOCOL_VERSION
    h = c.open("k1", confs, INFO, os.path.join(tmp, "ck"))
    c.load(h, 0, 1000)
    c.writes(h, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3"), (b"b", None)])
    assert c.get(h, b"a") == b"1" and c.get(h, b"b") is None
    assert c.scan(h) == [(b"a", b"1"), (b"c", b"3")]
    version, num_keys, metrics = c.commit(h)
    assert (version, num_keys) == (1, 2)
    assert set(metrics) >= {"ttlExpiredOnRead", "storeCommitTimeMs"}
    assert os.listdir(os.path.join(tmp, "ck")) == ["1.changelog"]
    c.load(h, 1, 1100)  # both entries were written at 1000 with ttl 100ms: expired
    assert c.get(h, b"a") is None


@pytest.mark.parametrize("update_type", ["OnCreateAndWrite", "OnReadAndWrite"])
def test_get_entries_answers_as_gets_one_by_one(server, confs, update_type: str) -> None:  # noqa: ANN001
    """OP_GET_ENTRIES (the shim's read-ahead) answers each key as OP_GET would, in order, with
    the same side effects: an expired entry deleted, a live one refreshed when reads update it."""
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    confs = {**confs, K.UPDATE_TYPE.key: update_type}
    answers = {}
    for way in ("one by one", "in one request"):
        h = c.open(f"entries-{update_type}-{way}", confs, INFO, os.path.join(tmp, f"ck-{way}"))
        c.load(h, 0, 1000)
        c.writes(h, [(b"old", b"1"), (b"live", b"2")])
        c.commit(h)
        c.load(h, 1, 1050)
        c.writes(h, [(b"live", b"3")])  # written at 1050
        c.commit(h)
        c.load(h, 2, 1120)  # "old" (1000) has expired, "live" (1050) has not
        c.writes(h, [(b"fresh", b"4")])  # pending in this batch: answered without the DB
        keys = [b"live", b"old", b"none", b"fresh", b"live", b"none", b"old"]
        got = [c.get_entry(h, k) for k in keys] if way == "one by one" else c.get_entries(h, keys)
        _version, num_keys, _metrics = c.commit(h)
        c.load(h, 3, 1160)  # 1160 - 1050 > 100ms unless the read at 1120 refreshed "live"
        answers[way] = (got, num_keys, c.get(h, b"live"))
    assert answers["in one request"] == answers["one by one"]
    got, num_keys, later = answers["one by one"]
    live = (b"3", 1050 if update_type == "OnCreateAndWrite" else 1120)
    assert got == [live, (None, 0), (None, 0), (b"4", 1120), live, (None, 0), (None, 0)]
    assert num_keys == 2  # the expired entry was deleted by the read
    assert later == (None if update_type == "OnCreateAndWrite" else b"3")


def test_checkpoint_ids_over_the_wire(server, confs) -> None:  # noqa: ANN001
    """Format 2: a commit answers its new id and its base's; a load takes the id; the change feed
    reads the changelog of a version on the lineage of the end version's id."""
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    ck = os.path.join(tmp, "ck-v2")
    h = c.open("v2", confs, dict(INFO, checkpointIds=True), ck)
    c.load(h, 0, 1000)
    c.writes(h, [(b"a", b"1")])
    c.commit(h)
    first, base = c.last_ckpt_ids
    assert first and base == ""
    assert os.listdir(ck) == [f"1_{first}.changelog"]
    c.load(h, 1, 1000, ckpt_id=first)
    c.writes(h, [(b"b", b"2")])
    c.commit(h)
    second, base = c.last_ckpt_ids
    assert base == first and second != first
    h2 = c.open("v2-fresh", confs, dict(INFO, checkpointIds=True), ck)  # restores from files
    assert c.load(h2, 2, 1000, ckpt_id=second)[1] == 2
    with pytest.raises(ServerError, match="2_nope.changelog"):
        c.load(h2, 2, 1000, ckpt_id="nope")
    for version, key in ((1, b"a"), (2, b"b")):
        r = c.call(P.OP_CHANGES, P.Writer().u32(h2).i64(version).i64(2).str(second).str("").payload(), h2)
        r.u32()  # iterator id
        done, n = r.u8(), r.u32()
        assert (done, [(r.bytes(), r.bytes_or_none() is not None) for _ in range(n)]) == (1, [(key, True)])


def test_set_time_moves_the_loaded_versions_now_forward_only(server, confs) -> None:  # noqa: ANN001
    """OP_SET_TIME, as the shim sends it in Real-time Mode: TTL expires inside one version."""
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    h = c.open("rt", confs, INFO, os.path.join(tmp, "ck"))
    c.load(h, 0, 1000)
    c.writes(h, [(b"a", b"1")])
    assert c.set_time(h, 1099) == 1099 and c.get(h, b"a") == b"1"
    c.writes(h, [(b"b", b"2")])                    # stamped 1099
    assert c.set_time(h, 1100) == 1100 and c.get(h, b"a") is None
    assert c.set_time(h, 900) == 1100 and c.get(h, b"b") == b"2"
    assert c.commit(h)[:2] == (1, 1)


def test_column_family_writes_append_and_remove_a_familys_key_range(server, confs) -> None:  # noqa: ANN001
    """A served transformWithState store's ListState merge (WRITE_APPEND) and family removal
    (WRITE_REMOVE_PREFIX) run in the server, on both data planes: the append reads the batch's
    pending value or the committed one, a removal takes only its family's keys (not a family whose
    name it starts), pending and committed alike, and both reach the changelog a restore replays."""
    from ttlstate.store.column_families import family_counts, family_prefix

    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    served = dict(confs, **{K.TTL.key: "off"})
    checkpoint = os.path.join(tmp, "ck-families")
    h = c.open("families", served, dict(INFO, columnFamilies=True), checkpoint)
    lst, other, longer = family_prefix("list"), family_prefix("value"), family_prefix("lists")
    c.load(h, 0, 1000)
    c.writes(h, [(lst + b"k1", b"a"), (other + b"k1", b"v"), (longer + b"k1", b"w")])
    c.append(h, lst + b"k1", b"b")  # onto a pending value
    c.append(h, lst + b"k2", b"c")  # onto nothing
    assert c.get(h, lst + b"k1") == b"ab" and c.get(h, lst + b"k2") == b"c"
    c.commit(h)
    c.load(h, 1, 1000)
    c.append(h, lst + b"k1", b"d")  # onto the committed value
    c.writes(h, [(other + b"k2", b"v2")])
    c.remove_prefix(h, other)
    assert [k for k, _ in c.scan(h)] == [lst + b"k1", lst + b"k2", longer + b"k1"]
    assert c.commit(h)[:2] == (2, 3)
    again = c.open("families-again", served, dict(INFO, columnFamilies=True), checkpoint)
    c.load(again, 2, 1000)  # rebuilt from the changelogs
    assert c.scan(again) == [(lst + b"k1", b"abd"), (lst + b"k2", b"c"), (longer + b"k1", b"w")]
    assert family_counts([k for k, _ in c.scan(again)]) == {"list": 2, "lists": 1}
    # The change feed of one family (OP_CHANGES naming it): its records only, not a family whose
    # name starts with its name; every write in the order made (a store with column families
    # logs each), appends as appends of their bytes; values as stored (after the kind, the
    # TtlValue's 8-byte timestamp).
    put, append, delete = P.CHANGE_PUT, P.CHANGE_APPEND, P.CHANGE_DELETE
    feeds = {(version, family): _changes(c, again, version, family)
             for version in (1, 2) for family in ("list", "value", "")}
    assert feeds[1, "list"] == [(put, lst + b"k1", b"a"), (append, lst + b"k1", b"b"),
                                (append, lst + b"k2", b"c")]
    assert feeds[2, "list"] == [(append, lst + b"k1", b"d")]
    assert feeds[2, "value"] == [(put, other + b"k2", b"v2"), (delete, other + b"k1", None),
                                 (delete, other + b"k2", None)]
    assert feeds[1, ""] == [(put, lst + b"k1", b"a"), (put, other + b"k1", b"v"), (put, longer + b"k1", b"w"),
                            *feeds[1, "list"][1:]]


def _changes(c: Client, h: int, version: int, family: str) -> list[tuple[int, bytes, bytes | None]]:
    """OP_CHANGES of `version` on format 1, the records of `family` ("": all), in one chunk:
    (kind, key, user bytes)."""
    r = c.call(P.OP_CHANGES, P.Writer().u32(h).i64(version).i64(version).str("").str(family).payload(), h)
    r.u32()  # iterator id
    done, n = r.u8(), r.u32()
    assert done == 1
    records = [(r.bytes(), r.bytes_or_none()) for _ in range(n)]
    return [(P.CHANGE_DELETE, k, None) if v is None else (v[0], k, v[9:]) for k, v in records]


def test_key_scan_and_lineage_for_the_shims_key_filter(server, confs) -> None:  # noqa: ANN001
    """OP_KEYS lists every stored key (expired ones too: a filter may hold more, never less);
    the lineage stays while the local DB only advances by commits, and changes when rebuilt."""
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    h = c.open("keys", confs, INFO, os.path.join(tmp, "ck-keys"))
    assert c.key_filter_allowed
    lineage, n = c.load(h, 0, 1000)
    assert n == 0 and c.keys(h) == []
    many = [(b"k%05d" % i, b"v") for i in range(20_000)]  # several chunks
    c.writes(h, many)
    c.commit(h)
    assert c.load(h, 1, 1050) == (lineage, 20_000)
    c.writes(h, [(b"late", b"v")])
    c.commit(h)
    assert c.load(h, 2, 5000) == (lineage, 20_001)  # everything but "late" expired at 5000
    assert c.keys(h) == sorted([k for k, _ in many] + [b"late"])
    rebuilt, _ = c.load(h, 1, 5000)  # an older version: rebuilt from the checkpoint
    assert rebuilt != lineage
    per_record = dict(confs, **{K.INCREMENTAL_PER_RECORD.key: "true"})
    c.open("keys-per-record", per_record, INFO, os.path.join(tmp, "ck-keys2"))
    assert not c.key_filter_allowed


def _layer_bits(keys: list[bytes], bits_log2: int, probes: int) -> bytes:
    """The shim's KeyFilter layer bits for `keys`, transcribed from its Scala (`probeBit`): all
    probes of a key in one block of 2^9 bits (the whole layer if smaller), the block chosen by
    h1's bits above the low 9, probe i at (h1 + i * (h2 | 1)) mod the block's size within it,
    both hashes signed 32-bit."""
    from ttlstate import _native

    def signed(x: int) -> int:
        return x - (1 << 32) if x >= 1 << 31 else x

    block_log2 = min(9, bits_log2)
    words = [0] * (1 << (bits_log2 - 6))
    for k in keys:
        a, b = _native.key_hashes(k)
        h1, step = signed(a), signed(b | 1)
        start = (((h1 % (1 << 64)) >> 9) & ((1 << (bits_log2 - block_log2)) - 1)) << block_log2
        for i in range(probes):
            bit = start | ((h1 + i * step) & ((1 << block_log2) - 1))
            words[bit >> 6] |= 1 << (bit & 63)
    return b"".join(w.to_bytes(8, "little") for w in words)


def _scanned_bits(c: Client, h: int, bits_log2: int, probes: int, **kw: int) -> bytes | None:
    """OP_KEY_FILTER_BITS until the server's scan has ended (it answers b"" meanwhile)."""
    deadline = time.monotonic() + 30
    while (bits := c.key_filter_bits(h, bits_log2, probes, **kw)) == b"" and time.monotonic() < deadline:
        time.sleep(0.02)
    return bits


def test_a_restore_sets_the_key_filter_bits_of_every_key_it_loaded(server, confs) -> None:  # noqa: ANN001
    """A load that rebuilds the local DB from the checkpoint (snapshot bulk load plus changelog
    replay), asked with LOAD_KEY_HASHES, keeps the filter's hashes of every key of that version
    (collected natively while building, or scanned from an SST snapshot's files), and
    OP_KEY_FILTER_BITS for that lineage and version answers once with the bits of a filter layer
    holding exactly those keys, as the shim sets them; a load that reuses the local DB, or one
    not asking, keeps none. The Python data plane keeps none (the shim then scans)."""
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    ck = os.path.join(tmp, "ck-hashes")
    confs = dict(confs, **{K.TTL.key: "1h"})
    h = c.open("hashes", confs, INFO, ck)
    native = confs[K.ENGINE.key] == "native"
    c.load(h, 0, 1000, key_hashes=True)
    assert c.key_hashes == (P.KEY_HASHES_READY if native else P.KEY_HASHES_NONE)  # built from nothing
    assert c.key_filter_bits(h, 6, 7) == (bytes(8) if native else None)
    first = [b"a%04d" % i for i in range(3000)]
    c.writes(h, [(k, b"v") for k in first])
    c.commit(h)
    c.simple(P.OP_SNAPSHOT_NOW, h)
    c.load(h, 1, 1000)
    second = [b"b%04d" % i for i in range(500)]
    c.writes(h, [(k, b"w") for k in second] + [(k, None) for k in first[:100]])
    c.commit(h)
    c.load(h, 2, 1000, key_hashes=True)
    assert not c.key_hashes_kept  # the local DB advanced by its own commits: nothing rebuilt
    assert c.key_filter_bits(h, 16, 7) is None

    h2 = c.open("hashes-restored", confs, INFO, ck)  # another provider: restores from files
    _lineage, n = c.load(h2, 2, 1000, key_hashes=True)
    assert n == 3400
    if not native:
        assert not c.key_hashes_kept and c.key_filter_bits(h2, 16, 7) is None
        return
    # Opened from an SST snapshot (the default layout): its keys are scanned, not collected.
    assert c.key_hashes == P.KEY_HASHES_SCANNING
    assert c.key_filter_bits(h2, 16, 7, version=1) is None  # not the version it restored
    assert c.key_filter_bits(h2, 16, 7, lineage=c.lineage + 1) is None  # nor its lineage
    bits = _scanned_bits(c, h2, 16, 7)  # scanned on a thread of its own since the load
    # The hashes are of every key of its files: a key a newer file deletes stays (a superset of
    # the keys stored, which is all a filter of the keys that may be present needs); never one
    # missing.
    stored = int.from_bytes(_layer_bits(first[100:] + second, 16, 7), "little")
    got = int.from_bytes(bits, "little")
    assert got & stored == stored
    assert bits == _layer_bits(first + second, 16, 7)
    assert c.key_filter_bits(h2, 16, 7) is None  # once
    c.load(h2, 2, 1000)
    assert not c.key_hashes_kept  # not asked for
    c.load(h2, 1, 1000, key_hashes=True)  # an older version: rebuilt from the files again
    assert c.key_hashes == P.KEY_HASHES_SCANNING
    with pytest.raises(ServerError, match="allowed 2\\^6..2\\^36 bits"):
        _scanned_bits(c, h2, 5, 7)

    # The shim asks at its next loads: the bits still hold every key of the restored version
    # (the next batch's keys the shim adds itself).
    h3 = c.open("hashes-later", confs, INFO, ck)
    c.load(h3, 2, 1000, key_hashes=True)
    restored_lineage = c.lineage
    assert c.key_hashes == P.KEY_HASHES_SCANNING
    third = [b"c%04d" % i for i in range(200)]
    c.writes(h3, [(k, b"x") for k in third])
    c.commit(h3)
    c.load(h3, 3, 1000, key_hashes=True)
    assert c.lineage == restored_lineage and not c.key_hashes_kept
    later = _scanned_bits(c, h3, 16, 7, version=2)
    want = int.from_bytes(_layer_bits(first[100:] + second, 16, 7), "little")
    assert int.from_bytes(later, "little") & want == want
    assert c.key_filter_bits(h3, 16, 7, version=2) is None  # once


def test_large_scan_streams_in_chunks(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[1])
    c.hello()
    h = c.open("k2", {K.ENGINE.key: "rocksdict"}, INFO, os.path.join(tmp, "ck2"))
    c.load(h, 0, 0)
    rows = [(b"%08d" % i, os.urandom(1000)) for i in range(1500)]
    c.writes(h, rows)
    before = c.round_trips
    assert c.scan(h) == rows
    assert c.round_trips - before > 1  # 1.5 MB does not fit one chunk


def test_errors_name_store_and_version(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    h = c.open("k3", confs, INFO, os.path.join(tmp, "ck3"))
    with pytest.raises(ServerError, match="op=0,part=0.*version 4.*does not exist") as e:
        c.load(h, 4, 0)
    assert e.value.code == P.ERR_VERSION_NOT_FOUND
    with pytest.raises(ServerError) as bad_conf:
        c.open("k4", {K.TTL.key: "soon"}, INFO, os.path.join(tmp, "ck4"))
    assert bad_conf.value.code == P.ERR_CONF and K.TTL.key in bad_conf.value.message


def test_pipelined_write_error_surfaces_at_next_sync_call(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    h = c.open("k5", confs, INFO, os.path.join(tmp, "ck5"))
    c.load(h, 0, 0, read_only=True)
    c.writes(h, [(b"x", b"1")])  # a put on a read-only store: no reply now
    with pytest.raises(ServerError, match="earlier pipelined write failed.*read-only"):
        c.get(h, b"x")


def test_other_protocol_version_is_refused(server) -> None:  # noqa: ANN001
    _proc, sockets, _tmp = server
    c = Client(sockets[0])
    with pytest.raises(ServerError, match=f"speaks protocol {P.PROTOCOL_VERSION}") as e:
        c.hello(version=99)
    assert e.value.code == P.ERR_PROTOCOL_VERSION


def test_socket_and_root_are_private(server) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    for s in sockets:
        assert stat.S_IMODE(os.stat(s).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(tmp, "srv")).st_mode) == 0o700


@pytest.mark.parametrize("when", ["right after READY", "while it watches"])
def test_exits_with_its_workers_on_stdin_eof(tmp_path, when: str) -> None:  # noqa: ANN001
    proc, _ = start_server(str(tmp_path / "srv"))
    if when == "while it watches":
        _watching(proc)
    children = _children(proc)
    assert len(children) == 2
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(timeout=10) == 0
    assert proc.stdout.read() == ""  # type: ignore[union-attr]  # the READY line is all the shim reads
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
    assert not os.path.exists(tmp_path / "srv")


def _watching(proc: subprocess.Popen) -> psutil.Process:
    """The supervisor once it exec'd its watch (it does right after the READY line)."""
    supervisor = psutil.Process(proc.pid)
    deadline = time.monotonic() + 10
    while "supervise.py" not in " ".join(supervisor.cmdline()):
        assert time.monotonic() < deadline, supervisor.cmdline()
        time.sleep(0.02)
    return supervisor


def test_workers_are_forked_from_the_supervisor_which_then_drops_what_it_loaded(tmp_path) -> None:  # noqa: ANN001
    """Forked (their command line is the supervisor's first), so what it loaded is shared; `ps`
    and psutil tell them apart by name. The supervisor then execs a bare interpreter with the
    same pid: the native library (and RocksDB with it) stays mapped in the workers only."""
    proc, _ = start_server(str(tmp_path / "srv"))
    try:
        supervisor = _watching(proc)
        cmd = supervisor.cmdline()
        assert cmd[1:3] == ["-I", "-S"] and supervisor.name() != WORKER_NAME
        # the server's --root, and no --socket-dir, as on the server's own command line
        assert cmd[cmd.index("--root") + 1] == str(tmp_path / "srv") and "--socket-dir" not in cmd
        for w in _children(proc):
            assert w.name() == WORKER_NAME and w.cmdline()[1:3] == ["-m", "ttlstate.server"]
            assert [m for m in w.memory_maps() if "ttlstate_native" in m.path]
        assert not [m.path for m in supervisor.memory_maps()
                    if "ttlstate_native" in m.path or "rocksdb" in m.path]
    finally:
        proc.kill()
        proc.wait()


def test_a_supervisor_that_cannot_exec_watches_from_where_it_is(tmp_path) -> None:  # noqa: ANN001
    """The exec failing (no interpreter path, the module not a file) costs memory, not the
    server: it says so and watches from the same process, with the same end."""
    code = ("import os, sys\n"
            "from ttlstate.server import supervise\n"
            "def refused(*a):\n    raise PermissionError('exec refused by this test')\n"
            "supervise.os.execv = refused\n"
            "from ttlstate.server.__main__ import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    root = tmp_path / "srv"
    proc = subprocess.Popen([sys.executable, "-c", code, "--root", str(root), "--workers", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("READY ")  # type: ignore[union-attr]
    children = _children(proc)
    assert len(children) == 2
    time.sleep(0.5)
    assert psutil.Process(proc.pid).cmdline()[1] == "-c"  # still the same program
    c = Client(str(root / "w0.sock"))
    assert c.hello() == P.PROTOCOL_VERSION  # serving
    proc.stdin.close()  # type: ignore[union-attr]
    assert proc.wait(timeout=10) == 0
    assert "could not exec the supervisor's watch" in proc.stderr.read()  # type: ignore[union-attr]
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive
    assert not root.exists()


def test_workers_follow_a_killed_supervisor(tmp_path) -> None:  # noqa: ANN001
    proc, _ = start_server(str(tmp_path / "srv"))
    _watching(proc)
    children = _children(proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, "workers outlived their supervisor"


def test_supervisor_exits_when_a_worker_dies(tmp_path) -> None:  # noqa: ANN001
    proc, _ = start_server(str(tmp_path / "srv"))
    _watching(proc)
    children = _children(proc)
    children[0].kill()
    started = time.monotonic()
    assert proc.wait(timeout=10) == 0  # a clean exit, not SIGABRT at interpreter shutdown
    assert time.monotonic() - started < 10
    _gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


def test_multi_megabyte_keys_and_values_cross_the_bridge(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    h = c.open("big", {K.ENGINE.key: "native"}, INFO, os.path.join(tmp, "ckbig"))
    c.load(h, 0, 0)
    big_key, big_value = b"k" * (2 << 20), os.urandom(6 << 20)
    c.writes(h, [(big_key, big_value)])
    assert c.get(h, big_key) == big_value
    assert c.commit(h)[:2] == (1, 1)
    c.load(h, 1, 0)
    assert c.scan(h) == [(big_key, big_value)]


@pytest.mark.parametrize("point", [p for p in faults.POINTS if p.startswith("commit-")])
def test_crash_point_kills_the_worker_inside_commit_once(tmp_path, monkeypatch, point: str) -> None:  # noqa: ANN001
    """`TTLSTATE_FAULTS`: the worker dies inside COMMIT, before or after the changelog reached
    the checkpoint; the supervisor follows; the marker disarms the point for the next server."""
    marker, ck = tmp_path / "marker", str(tmp_path / "ck")
    monkeypatch.setenv(faults.ENV, f"{point}:{marker}")
    for attempt in range(2):
        proc, sockets = start_server(str(tmp_path / f"srv{attempt}"), workers=1)
        try:
            c = Client(sockets[0])
            c.hello()
            h = c.open("k", CONFS, INFO, ck)
            c.load(h, 0, 1000)
            c.writes(h, [(b"a", b"1")])
            if attempt == 0:
                with pytest.raises(ConnectionError):
                    c.commit(h)
                assert marker.exists()
                assert os.listdir(ck) == ([] if point == "commit-before-upload" else ["1.changelog"])
                assert proc.wait(timeout=10) == 0, "the supervisor outlived its crashed worker"
            else:
                assert c.commit(h)[0] == 1 and os.listdir(ck) == ["1.changelog"]
        finally:
            proc.kill()
            proc.wait()


def test_negative_worker_count_is_refused(tmp_path) -> None:  # noqa: ANN001
    proc = subprocess.run([sys.executable, "-m", "ttlstate.server", "--root", str(tmp_path / "srv"),
                           "--workers", "-1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--workers must be >= 0" in proc.stderr
    assert "READY" not in proc.stdout


def test_a_failed_start_leaves_no_directory_and_no_process(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """A worker that cannot start (here: it fails at import on a bad TTLSTATE_FAULTS): the
    supervisor stops the others, removes the root the shim created for it, and exits 1."""
    root = tmp_path / "srv"
    root.mkdir(mode=0o700)  # as the shim does before it starts the server
    monkeypatch.setenv(faults.ENV, "no-such-point")
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.server", "--root", str(root), "--workers", "3"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "READY" not in out
    assert "failed to start" in err and "no-such-point" in err
    assert not root.exists()
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(root) in " ".join(p.info["cmdline"] or [])]


def _start_log(tmp_path, monkeypatch, level: str | None) -> str:  # noqa: ANN001
    """The supervisor's stderr from start to a clean exit."""
    if level is None:
        monkeypatch.delenv("TTLSTATE_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("TTLSTATE_LOG_LEVEL", level)
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.server", "--root", str(tmp_path / "srv"),
                             "--workers", "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().startswith("READY")
    workers = sorted(p.pid for p in _children(proc))
    _out, err = proc.communicate("", timeout=60)  # EOF on stdin: a clean exit
    assert proc.returncode == 0
    return err.replace("\n", " ") + f" WORKERS={workers} PID={proc.pid}"


def test_the_start_is_logged_at_info(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """One line (shown by default): pid, workers and their pids, engine, memory budget."""
    log = _start_log(tmp_path, monkeypatch, None)
    workers = log.split("WORKERS=")[1].split(" PID=")[0].strip("[]").split(", ")
    pid = log.split("PID=")[1]
    assert log.count("INFO ttlstate.lifecycle: ttlstate state server started") == 1
    assert f"pid {pid}, 2 worker(s) (pids {', '.join(workers)})" in log
    assert "native engine available" in log and "memory.maxBytes (default 256m)" in log
    assert "state server started" not in _start_log(tmp_path, monkeypatch, "WARNING")
    lower = _start_log(tmp_path, monkeypatch, "info")  # a worker must not trip over the case
    assert "state server started" in lower
    bad = _start_log(tmp_path, monkeypatch, "chatty")  # not a level: warned, default, starts anyway
    assert "TTLSTATE_LOG_LEVEL='chatty' is not a logging level" in bad and "state server started" in bad


# What `ttlstate repartition` asks of the state server: a loaded version's entries as stored
# (OP_ENTRIES: TtlValues with their timestamps, expired ones too), and whole TtlValues put into a
# store loaded empty (WRITE_PUT_ENTRY), kept as given.
WRITER = {K.TTL.key: "1h", K.UPDATE_TYPE.key: "OnReadAndWrite", K.TIME_SOURCE.key: "activeTime"}


def _written(c: Client, confs: dict[str, str], checkpoint: str) -> None:
    """Version 2 of a store: a and b written at 1000, then b read (refreshed) and c written at
    5000 (activeTime: 1000 plus the 4 s between the two batch timestamps)."""
    h = c.open("source", {**confs, **WRITER}, INFO, checkpoint)
    c.load(h, 0, 1000)
    c.writes(h, [(b"a", b"1"), (b"b", b"2")])
    c.commit(h)
    c.load(h, 1, 5000, previous_batch_ms=1000)
    assert c.get(h, b"b") == b"2"  # OnReadAndWrite: b's timestamp becomes 5000
    c.writes(h, [(b"c", b"3")])
    c.commit(h)


def test_a_store_copied_entry_by_entry_keeps_timestamps_and_settings(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    source, copy = os.path.join(tmp, "source"), os.path.join(tmp, "copy")
    _written(c, confs, source)

    # Read as a state reader would (another handle, other confs): what the files hold, unchanged.
    reader_info = {**INFO, "stateReader": True}
    r = c.open("reader", {**confs, K.TTL.key: "100ms"}, reader_info, source)
    c.load(r, 2, 10**9, read_only=True)  # all expired at that time under 100ms: still listed
    entries = c.entries(r)
    assert [(k, ttl_value.decode(v)) for k, v in entries] == [
        (b"a", (1000, b"1")), (b"b", (5000, b"2")), (b"c", (5000, b"3"))]

    # Written into a store loaded empty at version 1: committed as version 2, with a snapshot.
    w = c.open("copy", {**confs, **WRITER}, INFO, copy)
    c.load(w, 1, 5000, empty=True)
    c.put_entries(w, entries)
    version, num_keys, _metrics = c.commit(w)
    assert (version, num_keys) == (2, 3)
    assert sorted(os.listdir(copy)) >= ["2.changelog", "2.snapshot"]

    back = c.open("copy-reader", confs, reader_info, copy)
    c.load(back, 2, 0, read_only=True)
    assert c.entries(back) == entries


def test_a_put_entry_without_a_timestamp_fails_the_next_call(server, confs) -> None:  # noqa: ANN001
    _proc, sockets, tmp = server
    c = Client(sockets[0])
    c.hello()
    h = c.open("short", confs, INFO, os.path.join(tmp, "short"))
    c.load(h, 0, 1000, empty=True)
    c.put_entries(h, [(b"k", b"1234567")])  # 7 bytes: no room for the 8-byte timestamp
    with pytest.raises(ServerError) as e:
        c.commit(h)
    assert e.value.code in (P.ERR_BAD_REQUEST, P.ERR_INTERNAL) and "8" in str(e.value)
