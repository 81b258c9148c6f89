"""A Python client of the state server protocol: what the shim does, minus Spark.

Used by tests and by the bridge benchmark. Checkpoint callbacks are served from a local
directory, as the shim serves them from Hadoop's FileSystem.
"""

from __future__ import annotations

import json
import os
import socket

from ttlstate.checkpoint.location import LocalCheckpointLocation
from ttlstate.server import protocol as P

REMOVE_IF_EXPIRED = b"\x00remove-if-expired"  # a marker value for `writes`


class ServerError(RuntimeError):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


class Client:
    def __init__(self, socket_path: str, checkpoint_root: str | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(socket_path)
        self.rfile = self.sock.makefile("rb", buffering=1 << 16)
        self.checkpoint_root = checkpoint_root
        self.checkpoint_dirs: dict[int, str] = {}
        self._current_dir: str | None = None
        self.round_trips = 0
        # What the last load said (see `load`).
        self.key_hashes = P.KEY_HASHES_NONE
        self.key_hashes_kept = False
        self.lineage = self.loaded_version = -1

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()

    def send(self, code: int, payload: bytes = b"") -> None:
        self.sock.sendall(P.frame(code, payload))

    def call(self, code: int, payload: bytes = b"", handle: int | None = None) -> P.Reader:
        if handle is not None:
            self._current_dir = self.checkpoint_dirs.get(handle)
        self.send(code, payload)
        self.round_trips += 1
        while True:
            got = P.read_frame(self.rfile)
            if got is None:
                raise ConnectionError("state server closed the connection")
            rcode, body = got
            if rcode == P.RESP_OK:
                return P.Reader(body)
            if rcode == P.RESP_ERROR:
                r = P.Reader(body)
                raise ServerError(r.u16(), r.str())
            if rcode == P.RESP_CALLBACK:
                self._serve_callback(P.Reader(body))
                continue
            raise P.ProtocolError(f"unexpected frame {rcode}")

    def _serve_callback(self, r: P.Reader) -> None:
        loc = LocalCheckpointLocation(self._current_dir or "")
        kind = r.u8()
        try:
            if kind == P.CB_LIST:
                names = loc.list_files()
                w = P.Writer().u32(len(names))
                for n in names:
                    w.str(n)
                out = w.payload()
            elif kind == P.CB_FETCH:
                name, local = r.str(), r.str()
                loc.fetch(name, local)
                out = b""
            elif kind == P.CB_PUBLISH:
                local, name = r.str(), r.str()
                loc.publish(local, name)
                out = b""
            elif kind == P.CB_DELETE:
                loc.delete([r.str() for _ in range(r.u32())])
                out = b""
            else:
                raise P.ProtocolError(f"unknown callback {kind}")
            self.send(P.CB_RESULT_OK, out)
        except FileNotFoundError as e:
            self.send(P.CB_RESULT_ERROR, P.Writer().u8(P.CB_ERR_NOT_FOUND).str(str(e)).payload())
        except OSError as e:
            self.send(P.CB_RESULT_ERROR, P.Writer().u8(P.CB_ERR_IO).str(str(e)).payload())

    # -- convenience ---------------------------------------------------------------------
    def hello(self, version: int = P.PROTOCOL_VERSION) -> int:
        return self.call(P.OP_HELLO, P.Writer().u32(P.MAGIC).u32(version).payload()).u32()

    def open(self, key: str, confs: dict[str, str], info: dict[str, object], checkpoint_dir: str) -> int:
        payload = P.Writer().str(key).str(json.dumps(confs)).str(json.dumps(info)).payload()
        r = self.call(P.OP_OPEN, payload)
        handle, self.cacheable, self.key_filter_allowed = r.u32(), bool(r.u8()), bool(r.u8())
        self.ttl_ms, self.update_on_read = r.i64(), bool(r.u8())
        os.makedirs(checkpoint_dir, exist_ok=True)
        self.checkpoint_dirs[handle] = checkpoint_dir
        return handle

    def load(self, h: int, version: int, now_ms: int, read_only: bool = False,
             key_hashes: bool = False, watermark_ms: int = 0,
             previous_batch_ms: int | None = None, ckpt_id: str | None = None,
             empty: bool = False) -> tuple[int, int]:
        """Loads `version` for a batch of timestamp `now_ms` (and the offset log's watermark and
        previous batch timestamp; on checkpoint format 2, the version committed as `ckpt_id`);
        returns (lineage, number of keys in the local DB); `empty`: an empty store at `version`
        (Spark's loadEmpty). With `key_hashes`,
        `self.key_hashes_kept` then says whether `key_filter_bits` has bits."""
        flags = ((P.LOAD_READ_ONLY if read_only else 0) | (P.LOAD_KEY_HASHES if key_hashes else 0)
                 | (P.LOAD_CHECKPOINT_ID if ckpt_id is not None else 0) | (P.LOAD_EMPTY if empty else 0))
        w = (P.Writer().u32(h).i64(version).i64(now_ms).u8(flags).i64(watermark_ms)
             .i64(-1 if previous_batch_ms is None else previous_batch_ms))
        if ckpt_id is not None:
            w.str(ckpt_id).str("")
        r = self.call(P.OP_LOAD, w.payload(), h)
        lineage, num_keys = r.i64(), r.i64()
        self.now_ms = r.i64()
        self.key_hashes = r.u8()
        self.key_hashes_kept = self.key_hashes != P.KEY_HASHES_NONE
        self.lineage, self.loaded_version = lineage, version
        return lineage, num_keys

    def set_time(self, h: int, now_ms: int) -> int:
        """Real-time Mode's clock (OP_SET_TIME): the now the loaded version uses after it."""
        return self.call(P.OP_SET_TIME, P.Writer().u32(h).i64(now_ms).payload(), h).i64()

    def key_filter_bits(self, h: int, bits_log2: int, probes: int, lineage: int | None = None,
                        version: int | None = None) -> bytes | None:
        """The bits the shim would take into its key filter's first layer for `version` of
        `lineage` (default: what the last load loaded); b"" while the server still scans."""
        lineage = self.lineage if lineage is None else lineage
        version = self.loaded_version if version is None else version
        return self.call(P.OP_KEY_FILTER_BITS, P.Writer().u32(h).i64(lineage).i64(version).u8(bits_log2)
                         .u8(probes).payload(), h).bytes_or_none()

    def keys(self, h: int) -> list[bytes]:
        """Every key of the loaded version's local DB (OP_KEYS, then its chunks)."""
        r = self.call(P.OP_KEYS, P.Writer().u32(h).payload(), h)
        it_id = r.u32()
        out: list[bytes] = []
        while True:
            done, n = r.u8(), r.u32()
            for _ in range(n):
                out.append(r.bytes())
                if r.bytes_or_none() is not None:
                    raise P.ProtocolError("OP_KEYS chunk carried a value")
            if done:
                return out
            r = self.call(P.OP_ITER_NEXT, P.Writer().u32(h).u32(it_id).payload(), h)

    def entries(self, h: int) -> list[tuple[bytes, bytes]]:
        """Every entry of the loaded version's local DB as stored (OP_ENTRIES, then its chunks)."""
        r = self.call(P.OP_ENTRIES, P.Writer().u32(h).payload(), h)
        it_id = r.u32()
        out: list[tuple[bytes, bytes]] = []
        while True:
            done, n = r.u8(), r.u32()
            out.extend((r.bytes(), r.bytes()) for _ in range(n))
            if done:
                return out
            r = self.call(P.OP_ITER_NEXT, P.Writer().u32(h).u32(it_id).payload(), h)

    def put_entries(self, h: int, entries: list[tuple[bytes, bytes]]) -> None:
        """Whole TtlValues into a store loaded empty (WRITE_PUT_ENTRY), pipelined."""
        w = P.Writer().u32(h).u32(len(entries))
        for k, stored in entries:
            w.u8(P.WRITE_PUT_ENTRY).bytes(k).bytes(stored)
        self.send(P.OP_WRITES, w.payload())

    def get(self, h: int, key: bytes) -> bytes | None:
        return self.get_entry(h, key)[0]

    def get_entry(self, h: int, key: bytes) -> tuple[bytes | None, int]:
        """The value and its last-access time after the read (0 if absent)."""
        r = self.call(P.OP_GET, P.Writer().u32(h).bytes(key).payload(), h)
        return r.bytes_or_none(), r.i64()

    def get_entries(self, h: int, keys: list[bytes]) -> list[tuple[bytes | None, int]]:
        """`get_entry` of each key, in one round trip (OP_GET_ENTRIES: the shim's read-ahead)."""
        w = P.Writer().u32(h).u32(len(keys))
        for k in keys:
            w.bytes(k)
        r = self.call(P.OP_GET_ENTRIES, w.payload(), h)
        return [(r.bytes_or_none(), r.i64()) for _ in range(r.u32())]

    def writes(self, h: int, ops: list[tuple[bytes, bytes | None]]) -> None:
        w = P.Writer().u32(h).u32(len(ops))
        for k, v in ops:
            if v is None:
                w.u8(P.WRITE_REMOVE).bytes(k)
            elif v is REMOVE_IF_EXPIRED:
                w.u8(P.WRITE_REMOVE_EXPIRED).bytes(k)
            else:
                w.u8(P.WRITE_PUT).bytes(k).bytes(v)
        self.send(P.OP_WRITES, w.payload())

    def append(self, h: int, key: bytes, more: bytes) -> None:
        """WRITE_APPEND: `key`'s value becomes its stored value followed by `more`."""
        self.send(P.OP_WRITES, P.Writer().u32(h).u32(1).u8(P.WRITE_APPEND).bytes(key).bytes(more).payload())

    def remove_prefix(self, h: int, prefix: bytes) -> None:
        """WRITE_REMOVE_PREFIX: removes every live key starting with `prefix`."""
        self.send(P.OP_WRITES, P.Writer().u32(h).u32(1).u8(P.WRITE_REMOVE_PREFIX).bytes(prefix).payload())

    def scan(self, h: int, prefix: bytes | None = None) -> list[tuple[bytes, bytes]]:
        r = self.call(P.OP_ITER, P.Writer().u32(h).bytes(prefix).payload(), h)
        it_id = r.u32()
        out: list[tuple[bytes, bytes]] = []
        while True:
            done, n = r.u8(), r.u32()
            out += [(r.bytes(), r.bytes()) for _ in range(n)]
            if done:
                return out
            r = self.call(P.OP_ITER_NEXT, P.Writer().u32(h).u32(it_id).payload(), h)

    def commit(self, h: int) -> tuple[int, int, dict[str, int]]:
        r = self.call(P.OP_COMMIT, P.Writer().u32(h).payload(), h)
        version, num_keys, _mem = r.i64(), r.i64(), r.i64()
        metrics = {r.str(): r.i64() for _ in range(r.u32())}
        self.last_ckpt_ids = (r.str(), r.str())  # (new, base) checkpoint ids; "" on format 1
        return version, num_keys, metrics

    def simple(self, code: int, h: int, extra: bytes = b"") -> None:
        self.call(code, P.Writer().u32(h).payload() + extra, h)
