"""`TTLSTATE_FAULTS` entries: a kill by default, or a stall that burns CPU or sleeps."""

from __future__ import annotations

import pytest

from ttlstate import faults


def test_entries_parse_into_kills_and_stalls() -> None:
    spec = "commit-before-upload:/m/a,commit-after-upload+idle=2500:/m/b"
    assert faults._parse(spec) == {"commit-before-upload": faults.Fault("/m/a"),
                                   "commit-after-upload": faults.Fault("/m/b", "idle", 2500)}
    busy = faults._parse("commit-after-upload+busy=10:/x:y")  # a marker path may hold ':'
    assert busy == {"commit-after-upload": faults.Fault("/x:y", "busy", 10)}


@pytest.mark.parametrize("entry", ["nowhere:/m", "commit-before-upload", "commit-before-upload+nap=5:/m",
                                   "commit-before-upload+busy=:/m"])
def test_bad_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="bad entry"):
        faults._parse(entry)


@pytest.mark.parametrize("action", ["busy", "idle"])
def test_a_stall_creates_its_marker_and_returns(tmp_path, monkeypatch, action: str) -> None:  # noqa: ANN001
    marker = tmp_path / "m"
    monkeypatch.setattr(faults, "_ARMED", {"commit-before-upload": faults.Fault(str(marker), action, 50)})
    faults.crash_point("commit-before-upload")  # stalls 50 ms, then goes on (no SIGKILL)
    assert marker.exists()
