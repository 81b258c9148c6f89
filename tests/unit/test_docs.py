"""The docs site builds without a broken link, its generated pages match the code, and the
README stays a ten-minute read whose links all resolve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ttlstate.config.keys import ALL_KEYS
from ttlstate.docs.generate import REGENERATE, configuration_page, stale_pages
from ttlstate.docs.tables import metrics_table
from ttlstate.store.metric_names import ALL_METRICS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 300
# [text](target) and ![alt](target); the target ends at whitespace or ')'.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_generated_pages_are_up_to_date() -> None:
    stale = [str(p.relative_to(ROOT)) for p in stale_pages(DOCS)]
    assert not stale, f"stale generated docs pages {stale}; regenerate: {REGENERATE}"


def test_every_conf_key_is_documented() -> None:
    assert all(k.doc.strip() and k.allowed.strip() for k in ALL_KEYS), "a ConfKey without doc or allowed"
    page = configuration_page()
    assert all(f"| `{k.key}` |" in page for k in ALL_KEYS)


def test_every_metric_is_in_a_docs_page() -> None:
    text = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    rows = metrics_table().splitlines()[2:]
    assert len(rows) == len(ALL_METRICS)
    missing = [row for row in rows if row not in text]
    assert not missing, f"metrics missing from docs/ (add <!-- metrics-table --> to a page): {missing}"


def test_the_docs_home_and_the_site_list_every_page() -> None:
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    home = {target.partition("#")[0] for target in LINK.findall((DOCS / "index.md").read_text())}
    nav = (ROOT / "mkdocs.yml").read_text()
    assert not pages - home, f"docs/index.md does not list {sorted(pages - home)}"
    assert not [p for p in pages if f": {p}" not in nav], "mkdocs.yml's nav misses a page"


def _pages() -> list[tuple[str, str]]:
    """README and the docs pages but the results log (a record of what was said then)."""
    pages = [README, *sorted(DOCS.glob("*.md"))]
    return [(p.name, p.read_text()) for p in pages if p.name != "results-log.md"]


def test_the_glibc_minimum_is_the_wheels() -> None:
    """One fact: the wheel's manylinux tag (scripts/build_wheel.sh) is every page's minimum."""
    tag = re.search(r"PLATFORM=manylinux_(\d+)_(\d+)_", (ROOT / "scripts" / "build_wheel.sh").read_text())
    assert tag
    wheel = f"{tag.group(1)}.{tag.group(2)}"
    stated = [(name, v) for name, text in _pages() for v in re.findall(r"glibc\s+>=\s*(\d+\.\d+)", text)]
    assert stated and all(v == wheel for _, v in stated), stated


# Claims no test in this repository backs: each must say so in its paragraph.
UNTESTED = re.compile(r"Databricks|EMR 7|ABFS and\s+GCS\s+work|aarch64 and musl")


def test_claims_without_a_test_say_expected_not_tested() -> None:
    unmarked = [(name, para[:120]) for name, text in _pages() for para in re.split(r"\n\s*\n", text)
                if UNTESTED.search(para) and "not tested" not in para]
    assert not unmarked, unmarked


def test_readme_is_short() -> None:
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md: {n} lines, at most {README_MAX_LINES}; move details to docs/"


def _github_slug(heading: str) -> str:
    s = re.sub(r"[`*_]", "", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def test_readme_links_resolve() -> None:
    text = README.read_text()
    anchors = {_github_slug(h) for h in re.findall(r"^#+\s+(.*)$", text, flags=re.M)}
    targets = LINK.findall(text)
    assert targets, "no links found: the pattern is broken"
    broken = []
    for target in targets:
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        if not path:
            if anchor not in anchors:
                broken.append(target)
        elif not (ROOT / path).exists():
            broken.append(target)
    assert not broken, f"README.md links to what does not exist: {broken}"


def test_site_builds_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a link to a missing page or anchor, or a nav entry without its
    file, is an error."""
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
         "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, f"mkdocs build --strict failed:\n{out.stdout}\n{out.stderr}"
    assert (tmp_path / "site" / "configuration" / "index.html").exists()


def test_headline_figures_are_the_result_files() -> None:
    """The README's and the performance page's headline numbers are those of the result files the
    headline plot is drawn from (the numbers are documented, not asserted as a target): each
    provider's median, and the ratio as the median of the rounds' ratios, with the rounds."""
    from benchmarks.harness.headline_plot import DEFAULTS, figures

    figs = figures(DEFAULTS)
    expected = []
    for panel, unit in (("throughput", "k rows/s"), ("restore", " s"), ("batch", " s")):
        for case, f in figs[panel].items():
            digits = 1 if panel == "throughput" else 2
            rounds = ", ".join(f"{r:.2f}x" for r in f.rounds)
            expected.append((f"{panel} {case}", f"{f.spark:.{digits}f}{unit}", f"{f.ours:.{digits}f}{unit}",
                             f"**{f.ratio:.2f}x**", f"{rounds})"))
    for page in (README, DOCS / "performance.md"):
        text = page.read_text()
        lines = text.splitlines()
        missing = [e for e in expected if not any(all(v in line for v in e[1:]) for line in lines)]
        assert not missing, f"{page.name}: no table row has these figures of the result files: {missing}"


# "1.38x (rounds: 1.38x, 1.25x, 1.42x)", "**0.49x** the time (0.44x, 0.49x, 0.52x)"
ROUNDS = re.compile(r"\*{0,2}(\d+\.\d+)x\*{0,2}(?: the time)? \((?:rounds:? )?(\d+\.\d+)x, (\d+\.\d+)x, "
                    r"(\d+\.\d+)x\)")


def test_a_ratio_given_with_its_rounds_is_their_median() -> None:
    """A headline ratio (the README's, the performance page's headline table) followed by three
    rounds' ratios is their median (a quotient of the providers' medians can differ from every
    round's, e.g. 1.66x over rounds 0.82x, 1.76x, 1.36x)."""
    import statistics

    performance = (DOCS / "performance.md").read_text()
    start = performance.index("## Headline")
    headline = performance[start:performance.index("\n## ", start + 1)]
    wrong = []
    for page, text in ((README, README.read_text()), (DOCS / "performance.md", headline)):
        for n, line in enumerate(text.splitlines(), 1):
            for m in ROUNDS.finditer(line):
                rounds = [float(m.group(k)) for k in (2, 3, 4)]
                if abs(statistics.median(rounds) - float(m.group(1))) > 0.005:
                    wrong.append(f"{page.name}:{n}: {m.group(0)}")
    assert ROUNDS.search(README.read_text()), "no ratio with rounds found: the pattern is broken"
    assert not wrong, wrong


def test_headline_plot_draws(tmp_path: Path) -> None:
    from benchmarks.harness.headline_plot import DEFAULTS, plot

    out = tmp_path / "headline.png"
    plot(DEFAULTS, out)
    assert out.stat().st_size > 10_000


def test_readme_key_table_matches_keys() -> None:
    """The README's short table of the most used keys names real keys, options and defaults."""
    by_suffix = {k.suffix: k for k in ALL_KEYS}
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in README.read_text().splitlines() if line.startswith("| `") and "` | `" in line]
    checked = 0
    for cells in rows:
        k = by_suffix.get(cells[0].strip("`"))
        if k is not None and "<" not in k.suffix:
            assert cells[1].strip("`").startswith(k.option), (cells, k.option)
            assert cells[2] == f"`{k.default}`", (cells, k.default)
            checked += 1
    assert checked >= 5, f"README's key table not found (checked {checked} rows)"
