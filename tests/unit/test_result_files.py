"""Git holds exactly the benchmark result files that a page cites: every file a documentation
page (the results log aside, which names past runs' files with the commands that reproduce
them) or the benchmark harness names is in `benchmarks/results/`, and every file there in git
is named by one of them. The directory itself is ignored, so a new run's files stay out until
a page cites them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
# A result file's name as the pages write it: dated, `archive/` possibly before it.
NAME = re.compile(r"(?:archive/)?\d{4}-\d{2}-\d{2}-[A-Za-z0-9.-]+?\.(?:json|png)")


def _citing_text() -> str:
    pages = [p for p in (ROOT / "docs").glob("*.md") if p.name != "results-log.md"]
    code = list((ROOT / "benchmarks" / "harness").glob("*.py"))
    return "\n".join(p.read_text() for p in [*pages, ROOT / "README.md", *code])


def _cited(text: str) -> set[str]:
    names = set(NAME.findall(text))
    # `x.json` / `.png`: the growth plot beside its result file
    names |= {m[:-len(".json")] + ".png" for m in re.findall(r"([\w.-]+\.json)`\s*/\s*`\.png`", text)}
    # headline_plot.py: RESULTS / f"{DATE}-<name>.json"
    date = re.search(r'^DATE = "(\d{4}-\d{2}-\d{2})"', text, re.M)
    if date:
        names |= {date.group(1) + m for m in re.findall(r'\{DATE\}(-[\w.-]+\.json)', text)}
    # `...-suffix.json`: a name abbreviated after a cited one of the same run
    for suffix in re.findall(r"\.\.\.(-[\w.-]+\.json)", text):
        names |= {p.name for p in RESULTS.glob(f"*{suffix}")}
    return names


def _tracked() -> set[str]:
    out = subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.split()
    return {f.removeprefix("benchmarks/results/") for f in out}


def test_every_cited_result_file_is_in_git() -> None:
    cited, tracked = _cited(_citing_text()), _tracked()
    assert len(cited) > 10  # the pages were read
    assert not cited - tracked, f"cited but not in git (git add -f): {sorted(cited - tracked)}"


def test_no_result_file_in_git_is_left_uncited() -> None:
    cited, tracked = _cited(_citing_text()), _tracked()
    assert not tracked - cited, f"in git but no page cites them (git rm --cached): {sorted(tracked - cited)}"


def test_the_results_directory_is_ignored() -> None:
    probe = "benchmarks/results/2099-01-01-probe.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", probe], cwd=ROOT)
    assert ignored.returncode == 0, "benchmarks/results/ must be in .gitignore"
