"""Where the test suite's time goes, by group, from a JUnit XML file pytest wrote.

    python -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --junitxml=/tmp/suite.xml
    python benchmarks/suite_times.py /tmp/suite.xml [--before /tmp/old.xml]

Each test file belongs to one group, the first of these that it matches: browser (headless
Chromium: tests/test_browser_*.py), image and deploy (podman, buildah, HAProxy, hadolint),
install (a fresh virtual environment), model cache (converting the GGUF and fitting the tuned
lens, damaged and recovered), AppTest pages (a file that opens the app's pages in Streamlit's
AppTest), reference (torch or transformers computing the expected numbers: a file using the
hf, hf_decoder or sbert fixtures), and the rest (the fast loop's files). A group's time is the
sum of its tests' durations (setup, call and teardown, as JUnit counts them): under
pytest-xdist the workers' sums add up to more than the wall time, which the file's own total
gives.
"""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
GROUPS = ("browser", "image and deploy", "install", "model cache", "AppTest pages", "reference",
          "rest")
USES_REFERENCE = re.compile(r"def test_\w+\([^)]*\b(hf|hf_decoder|sbert)\b")


def group_of(file: str) -> str:
    name = Path(file).name
    if name.startswith("test_browser"):
        return "browser"
    if name in ("test_image.py", "test_image_digest.py", "test_deploy.py"):
        return "image and deploy"
    if name == "test_install.py":
        return "install"
    if name in ("test_model_cache.py", "test_tuned_lens.py"):
        return "model cache"
    text = (TESTS / name).read_text(encoding="utf-8") if (TESTS / name).exists() else ""
    if "open_page(" in text or "AppTest" in text:
        return "AppTest pages"
    if USES_REFERENCE.search(text):
        return "reference"
    return "rest"


def read(path: str) -> tuple[float, dict[str, list[float]]]:
    """(the run's wall time, group → [tests, seconds, failures])."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    by_group: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for case in suite.iter("testcase"):
        file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        row = by_group[group_of(file)]
        row[0] += 1
        row[1] += float(case.get("time", 0))
        row[2] += any(c.tag in ("failure", "error") for c in case)
    return float(suite.get("time", 0)), by_group


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml")
    parser.add_argument("--before", help="an earlier run's JUnit XML, printed beside it")
    args = parser.parse_args()
    runs = [("after", *read(args.xml))]
    if args.before:
        runs.insert(0, ("before", *read(args.before)))
    head = "".join(f" | {label} tests | {label} s" for label, *_ in runs)
    print(f"| group{head} |")
    print("|---" * (1 + 2 * len(runs)) + "|")
    for group in GROUPS:
        cells = "".join(f" | {int(g[group][0]) if group in g else 0} | "
                        f"{g[group][1] if group in g else 0:.0f}" for _, _, g in runs)
        print(f"| {group}{cells} |")
    totals = "".join(f" | {int(sum(r[0] for r in g.values()))} | "
                     f"{sum(r[1] for r in g.values()):.0f}" for _, _, g in runs)
    print(f"| sum of durations{totals} |")
    print("".join(f"{label}: wall {wall:.0f} s ({wall / 60:.1f} min), "
                  f"{int(sum(r[2] for r in g.values()))} failed. "
                  for label, wall, g in runs))


if __name__ == "__main__":
    main()
