"""No Python file of the package is over 400 lines: each module is one job a newcomer reads in
one sitting (the house rule); a file that grows past it is split by job, not trimmed."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python"
LIMIT = 400


def test_no_python_file_is_over_400_lines() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 50  # read the package
    over = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not over, f"over {LIMIT} lines: {over}"
