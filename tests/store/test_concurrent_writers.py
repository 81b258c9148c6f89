"""Two writers of one checkpoint (checkpoint format 1): nothing committed is ever deleted.

A second driver started on a running query's checkpoint re-runs batches before Spark stops it,
and a zombie task can commit an old version late. Neither may delete the running writer's
committed files, nor may a load mix in a snapshot of another attempt's state.
"""

from __future__ import annotations

import logging
import os

import pytest

from ttlstate.checkpoint import names
from ttlstate.store.provider import StoreProvider


def _batch(p: StoreProvider, version: int, rows: dict[bytes, bytes | None]) -> None:
    """Commit version + 1 as batch `version` of a deterministic query would (its batch time comes
    from the offset log, so a re-run sees the same one)."""
    s = p.get_store(version, now_ms=1_000 + version)
    for k, v in rows.items():
        if v is None:
            s.remove(k)
        else:
            s.put(k, v)
    s.commit()


def _rows(batch: int) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {b"k%03d" % (batch * 3 + i): b"b%d" % batch for i in range(3)}
    if batch >= 2:
        out[b"k%03d" % ((batch - 2) * 3)] = None  # and a delete
    return out


def _model(upto: int) -> dict[bytes, bytes]:
    state: dict[bytes, bytes | None] = {}
    for b in range(upto):
        state.update(_rows(b))
    return {k: v for k, v in state.items() if v is not None}


def _state(p: StoreProvider, version: int) -> dict[bytes, bytes]:
    return dict(p.get_store(version, now_ms=1_000 + version).iterator())


def _files(p: StoreProvider) -> set[str]:
    """The versioned files (SST files are checked by every load instead)."""
    return {n for n in os.listdir(p.checkpoint.directory) if names.parse(n) is not None}


@pytest.mark.parametrize("snapshot_interval", [2, 1000])
def test_second_writer_rerunning_a_batch_deletes_nothing(make_provider, snapshot_interval) -> None:  # noqa: ANN001
    """The race of two drivers: B re-runs batch 4 while A has gone on to version 12; A goes on to
    20. Both run maintenance. Every version A committed stays loadable, exactly."""
    a = make_provider(snapshot_interval=snapshot_interval)
    for b in range(12):
        _batch(a, b, _rows(b))
        a.do_snapshot_maintenance()
    before = _files(a)
    second = make_provider(snapshot_interval=snapshot_interval)
    _batch(second, 4, _rows(4))  # B's re-run of batch 4: version 5 again
    second.do_snapshot_maintenance()
    second.do_cleanup_maintenance(3)  # B serves version 5: retention counts back from it
    assert {n for n in before if int(n.split(".")[0]) > 5} <= _files(a)
    for b in range(12, 20):
        _batch(a, b, _rows(b))
        a.do_snapshot_maintenance()
        a.do_cleanup_maintenance(5)
    for v in range(16, 21):  # the retained versions, on a fresh executor
        assert _state(make_provider(snapshot_interval=snapshot_interval), v) == _model(v)


def test_late_commit_of_an_old_version_with_other_output_loads_as_spark_does(
        make_provider, caplog) -> None:  # noqa: ANN001
    """A zombie commits version 5 late with other output (a non-deterministic batch). Format 1
    names files by version alone, so its file replaces A's: Spark's providers then load the
    zombie's version 5 under A's later changelogs, and so does ttlstate, saying so in the log
    (format 2 keeps both attempts apart: the commit log names the one to load)."""
    a = make_provider(snapshot_interval=1000)
    for b in range(10):
        _batch(a, b, _rows(b))
    zombie = make_provider(snapshot_interval=1000)
    _batch(zombie, 4, {b"zombie": b"z"})
    with caplog.at_level(logging.WARNING):
        state = _state(make_provider(snapshot_interval=1000), 10)
    assert "does not continue the state before it" in caplog.text and "6.changelog" in caplog.text
    assert state[b"zombie"] == b"z"  # Spark's providers load the same mix
    assert _state(a, 10) == _model(10)  # the running writer's own state is untouched


def _apply(state: dict[bytes, bytes], rows: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    out = dict(state)
    for k, v in rows.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def test_snapshot_of_a_superseded_attempt_is_never_loaded(make_provider, caplog) -> None:  # noqa: ANN001
    """Version 4 is snapshotted, then batch 3 is re-run with other output (version 4 again). The
    old snapshot stays (a commit deletes nothing) but holds the old attempt's state: every load
    of version 4 or later passes it over for an older base."""
    p = make_provider(snapshot_interval=2)
    for b in range(4):
        _batch(p, b, _rows(b))
    assert p.write_snapshot() == "4.snapshot"
    _batch(p, 3, {b"rerun": b"r"})  # the re-run: version 4 again, other output
    assert "4.snapshot" in _files(p)
    v4 = _apply(_model(3), {b"rerun": b"r"})
    with caplog.at_level(logging.WARNING):
        assert _state(make_provider(snapshot_interval=2), 4) == v4
    assert "4.snapshot holds another attempt's state" in caplog.text
    _batch(p, 4, _rows(4))
    assert _state(make_provider(snapshot_interval=2), 5) == _apply(v4, _rows(4))


def test_local_state_of_another_attempt_is_not_replayed_onto(make_provider) -> None:  # noqa: ANN001
    """An executor keeps version 5 locally; another attempt re-commits 5 with other output and 6
    follows it. A load of 6 there must not replay 6 onto the local 5 of the first attempt."""
    a = make_provider(snapshot_interval=1000)
    for b in range(5):
        _batch(a, b, _rows(b))
    assert a.local_version == 5
    other = make_provider(snapshot_interval=1000)
    _batch(other, 4, {b"other": b"o"})  # version 5, other output
    _batch(other, 5, _rows(5))  # version 6 on top of it
    expected = _apply(_apply(_model(4), {b"other": b"o"}), _rows(5))
    assert _state(a, 6) == expected
    assert _state(make_provider(snapshot_interval=1000), 6) == expected


@pytest.mark.parametrize("make_provider", ["native"], indirect=True)  # replays on an SST snapshot
def test_a_load_across_two_writers_counts_the_keys_it_loaded(make_provider) -> None:  # noqa: ANN001
    """Changelogs record the key count their writer knew (every key read before it is written);
    across a zombie's version 5 that count is the writer's, not the mix's, so the load of 10
    from snapshot 2 must count the keys it loaded instead of taking the last changelog's."""
    def known_batch(p: StoreProvider, version: int, rows: dict[bytes, bytes | None]) -> None:
        s = p.get_store(version, now_ms=1_000 + version)
        for k, v in rows.items():
            s.get(k)
            if v is None:
                s.remove(k)
            else:
                s.put(k, v)
        s.commit()

    a = make_provider(snapshot_interval=1000)
    for b in range(10):
        known_batch(a, b, _rows(b))
        if b == 1:
            assert a.write_snapshot() == "2.snapshot"
    known_batch(make_provider(snapshot_interval=1000), 4, {b"zombie": b"z", b"zombie2": b"z"})
    fresh = make_provider(snapshot_interval=1000)
    state = _state(fresh, 10)
    assert state[b"zombie"] == b"z" and state != _model(10)
    assert fresh.num_keys == len(state) != a.num_keys
