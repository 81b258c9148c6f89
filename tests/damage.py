"""What happens to checkpoint files on a DFS, done to one file: bit rot, a copy cut short, a
zeroed block, a clean-up script, a writer that appended to the wrong file. Shared by the store's
and the query's damaged-file tests."""

from __future__ import annotations

import os

DAMAGES = ("flip", "truncate", "zero", "delete", "garbage")
# What leaves a file unusable; bytes appended after a file's end ("garbage") leave the file
# itself intact (its recorded size and checksum still hold), so it is read up to its end.
BREAKING = ("flip", "truncate", "zero", "delete")


def damage(path: str, how: str) -> None:
    if how == "delete":
        os.unlink(path)
        return
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if how == "flip":
        data[len(data) // 2] ^= 0x01
    elif how == "truncate":
        data = data[: len(data) // 2]
    elif how == "zero":
        third = max(1, len(data) // 3)
        data[third:2 * third] = bytes(len(data[third:2 * third]))
    elif how == "garbage":
        data += b"garbage appended by another writer"
    else:
        raise ValueError(f"no damage {how!r}: one of {', '.join(DAMAGES)}")
    with open(path, "wb") as f:
        f.write(bytes(data))
