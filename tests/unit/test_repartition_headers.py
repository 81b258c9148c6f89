"""`ttlstate repartition` reading the headers of a checkpoint's files: a damaged header is named
as damaged (file and what is wrong), never taken for TTL settings that differ between partitions;
settings that truly differ are still refused as such (repartition_plan.py's rule)."""

from __future__ import annotations

import os
import shutil

import pytest

from ttlstate.checkpoint.record_file import KIND_CHANGELOG, header_of, write_record_file
from ttlstate.spark import repartition_plan as RP
from ttlstate.spark.repartition_headers import check_differing_settings, header

SETTINGS = {"ttlMs": 60000, "updateType": "OnCreateAndWrite", "stateVisibility": "NeverReturnExpired",
            "timeSource": "batchTimestamp"}


class LocalFs:
    """The part of CheckpointFs that `header` and `check_differing_settings` use, on a local
    folder (CheckpointFs itself needs a JVM; the files and their checks are the real ones)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def exists(self, rel: str) -> bool:
        return os.path.exists(os.path.join(self.root, rel))

    def read(self, rel: str, limit: int | None = None) -> bytes:
        with open(os.path.join(self.root, rel), "rb") as f:
            return f.read() if limit is None else f.read(limit)

    def fetch(self, rel: str, local: str) -> None:
        shutil.copyfile(os.path.join(self.root, rel), local)


def _changelogs(root: str, settings: list[dict]) -> dict[int, tuple[str, dict]]:
    """Version 3's changelog of partitions 0.., each recording its `settings`; their headers."""
    fs = LocalFs(root)
    for p, s in enumerate(settings):
        os.makedirs(os.path.join(root, "state", "0", str(p)))
        write_record_file(os.path.join(root, "state", "0", str(p), "3.changelog"), KIND_CHANGELOG,
                          f"0/{p}/default", 3, 1000, [(b"k%d" % p, b"v")], ttl_ms=s.get("ttlMs"),  # type: ignore[arg-type]
                          settings=s, keys=1)
    found = {p: header(fs, f"state/0/{p}", 3) for p in range(len(settings))}  # type: ignore[arg-type]
    assert None not in found.values()
    return found  # type: ignore[return-value]


def _rewrite_header_bytes(path: str, old: bytes, new: bytes) -> None:
    """Bit rot inside the header that leaves its JSON valid (the same length, so the file's
    sizes still add up): only the checksum tells."""
    assert len(old) == len(new)
    with open(path, "rb") as f:
        data = f.read()
    assert data.count(old) == 1
    with open(path, "wb") as f:
        f.write(data.replace(old, new))


def test_a_header_damaged_into_other_ttl_settings_is_named_as_damaged(tmp_path) -> None:  # noqa: ANN001
    root = str(tmp_path)
    _changelogs(root, [SETTINGS, SETTINGS])
    victim = os.path.join(root, "state", "0", "1", "3.changelog")
    _rewrite_header_bytes(victim, b'"ttlMs": 60000, "updateType"', b'"ttlMs": 60001, "updateType"')  # one bit
    files = {p: header(LocalFs(root), f"state/0/{p}", 3) for p in (0, 1)}
    assert files[1][1]["settings"]["ttlMs"] == 60001  # type: ignore[index]  # the JSON still parses
    with pytest.raises(RP.Refused) as e:
        check_differing_settings(LocalFs(root), files)  # type: ignore[arg-type]
    msg = str(e.value)
    assert msg.startswith(f"{root}/state/0/1/3.changelog is damaged: it is corrupt (checksum mismatch)"), msg
    assert "TTL settings" in msg and "cannot be trusted" in msg and "different" not in msg


def test_a_header_with_impossible_values_is_named_as_damaged(tmp_path) -> None:  # noqa: ANN001
    root = str(tmp_path)
    _changelogs(root, [SETTINGS])
    victim = os.path.join(root, "state", "0", "0", "3.changelog")
    _rewrite_header_bytes(victim, b'"OnCreateAndWrite"', b'"OnCreateAndWritd"')  # one bit: e -> d
    with pytest.raises(RP.Refused, match=r"3\.changelog is damaged: its header's settings\.updateType "
                                               r"is 'OnCreateAndWritd', not one of OnCreateAndWrite, "
                                               r"OnReadAndWrite; the checkpoint is unchanged"):
        header(LocalFs(root), "state/0/0", 3)  # type: ignore[arg-type]


def test_settings_that_truly_differ_are_left_to_the_plans_refusal(tmp_path) -> None:  # noqa: ANN001
    """Intact files (one with bytes appended after its end, which a load reads up to that end)
    that record different settings: no damage is reported; the plan refuses them as different."""
    root = str(tmp_path)
    files = _changelogs(root, [SETTINGS, {**SETTINGS, "ttlMs": 120000}])
    with open(os.path.join(root, "state", "0", "1", "3.changelog"), "ab") as f:
        f.write(b"bytes another writer appended")
    check_differing_settings(LocalFs(root), files)  # type: ignore[arg-type]
    headers = {(0, p, "default"): h for p, (_, h) in files.items()}
    assert len({RP.settings_text(h) for h in headers.values()}) == 2


@pytest.mark.parametrize(("field", "value", "what"), [
    ("settings", "garbage", "settings is 'garbage', not an object"),
    ("settings", {**SETTINGS, "ttlMs": "60000"},
     "settings.ttlMs is '60000', not null or a whole number from 0"),
    ("settings", {**SETTINGS, "ttlMs": -5}, "settings.ttlMs is -5, not null or a whole number from 0"),
    ("settings", {**SETTINGS, "timeSource": ["x"]}, "settings.timeSource is ['x'], not one of"),
    ("keys", 1.5, "keys is 1.5, not null or a whole number from 0"),
    ("batchTimeMs", True, "batchTimeMs is True, not null or a whole number"),
])
def test_header_problem_names_the_field_and_its_value(field: str, value: object, what: str) -> None:
    header = {"store": "0/0/default", "version": 3, "batchTimeMs": 1000, "ttlMs": 60000,
              "settings": SETTINGS, "keys": 1}
    assert RP.header_problem(header) is None
    problem = RP.header_problem({**header, field: value})
    assert problem is not None and problem.startswith(what), problem


def test_every_header_ttlstate_writes_has_no_problem(tmp_path) -> None:  # noqa: ANN001
    """Files of before settings were recorded (ttlMs only), TTL off, and every enum value."""
    path = str(tmp_path / "f")
    for settings in (None, {**SETTINGS, "ttlMs": None},
                     {"ttlMs": 1, "updateType": "OnReadAndWrite",
                      "stateVisibility": "ReturnExpiredIfNotCleanedUp", "timeSource": "activeTime"}):
        write_record_file(path, KIND_CHANGELOG, "0/0/default", 3, None, [], ttl_ms=None, settings=settings)
        with open(path, "rb") as f:
            assert RP.header_problem(header_of(f.read())[1]) is None
