"""The class image's tag (tests/image_helpers.py, issue 35): the digest of what the image is made
from, so that tests/test_image.py builds the image again exactly when it would differ and uses
the one built before otherwise. Computed here on a copy of the checkout's files, changed one at
a time: a file the Dockerfile copies, the Dockerfile, the base or a build argument changes it;
a test, the README, the docs, Python's bytecode or a file's time does not."""

import os
import shutil
from pathlib import Path

import pytest

from tests import image_helpers as ih

ROOT = Path(__file__).resolve().parents[1]
# what the image holds of the checkout (read off the Dockerfile's COPY lines by a person)
COPIED = ("requirements.txt", "requirements-nodeps.txt", "constraints.txt", ".streamlit",
          "attnviz", "pages", "app.py")
UNRELATED = ("README.md", "docs/deploy.md", "tests/test_image.py")
BASE_ID = "sha256:" + "1" * 64
ARGS = {"TORCH_INDEX_URL": "", "PIP_CONFIG_FILE": "/mnt/pip.conf"}
PYC = "attnviz/models/decoders/__pycache__/decoder.cpython-311.pyc"


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The files of the checkout that the image is made from, and a few it is not, copied;
    with a stray bytecode file in a package (.dockerignore leaves those out)."""
    copy = tmp_path / "checkout"
    for name in [*COPIED, "Dockerfile", ".dockerignore", *UNRELATED]:
        source, target = ROOT / name, copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(source, target)
    (copy / PYC).parent.mkdir()
    (copy / PYC).write_bytes(b"bytecode")
    return copy


def files_under(root: Path, names) -> set[str]:
    return {(Path(folder) / f).relative_to(root).as_posix()
            for name in names for folder, dirs, files in os.walk(root / name)
            if "__pycache__" not in Path(folder).parts for f in files} \
        | {name for name in names if (root / name).is_file()}


def test_the_digest_changes_with_what_the_image_is_made_of_and_nothing_else(checkout):
    assert set(ih.image_inputs(checkout)) == files_under(checkout, [*COPIED, "Dockerfile",
                                                                    ".dockerignore"])
    first = ih.image_digest(checkout, BASE_ID, ARGS)
    assert ih.image_digest(checkout, BASE_ID, ARGS) == first
    assert ih.image_digest(checkout, "sha256:" + "2" * 64, ARGS) != first
    assert ih.image_digest(checkout, BASE_ID, {**ARGS, "TORCH_INDEX_URL": "x"}) != first
    mounted = checkout.parent / "mnt"
    mounted.mkdir()
    (mounted / "pip.conf").write_text("[global]\nindex-url = https://a.example/simple\n")
    with_pip = ih.image_digest(checkout, BASE_ID, ARGS, mounted)
    (mounted / "pip.conf").write_text("[global]\nindex-url = https://b.example/simple\n")
    assert len({first, with_pip, ih.image_digest(checkout, BASE_ID, ARGS, mounted)}) == 3

    def changed(name: str, change) -> str:
        path = checkout / name
        before = (path.read_bytes(), path.stat().st_mode) if path.exists() else None
        change(path)
        try:
            return ih.image_digest(checkout, BASE_ID, ARGS)
        finally:
            if before is None:
                path.unlink()
            else:
                path.write_bytes(before[0])
                path.chmod(before[1])

    def append(path: Path) -> None:
        path.write_bytes(path.read_bytes() + b"\n")

    page = sorted((checkout / "pages").iterdir())[0].relative_to(checkout).as_posix()
    for name in ("attnviz/app/main.py", "attnviz/models/decoders/decoder.py",
                 "attnviz/i18n/locales/zh.po", page, "app.py", ".streamlit/config.toml",
                 "constraints.txt", "requirements-nodeps.txt", "Dockerfile"):
        assert changed(name, append) != first, name
    assert changed("attnviz/core/new_module.py", lambda p: p.write_text("x = 1\n")) != first
    assert changed("attnviz/core/engine.py", lambda p: p.chmod(0o755)) != first
    for name in (*UNRELATED, PYC, "tests/test_new.py"):
        assert changed(name, append if (checkout / name).exists()
                       else lambda p: p.write_text("x = 1\n")) == first, name
    os.utime(checkout / "attnviz/models/decoders/decoder.py", (1e9, 1e9))        # only its time
    assert ih.image_digest(checkout, BASE_ID, ARGS) == first


def test_the_build_context_is_those_files_at_one_time(checkout, tmp_path):
    """What buildah is given: the same files, the same bytes, every file and folder at one time
    (buildah's layer cache compares files' times too)."""
    staged = tmp_path / "context"
    staged.mkdir()
    ih.stage_context(checkout, staged)
    inputs = ih.image_inputs(checkout)
    assert files_under(staged, os.listdir(staged)) == set(inputs)
    for rel, path in inputs.items():
        assert (staged / rel).read_bytes() == path.read_bytes(), rel
    times = {p.stat().st_mtime for p in [staged, *staged.rglob("*")]}
    assert times == {ih.CONTEXT_TIME}
    assert ih.image_digest(staged, BASE_ID, ARGS) == ih.image_digest(checkout, BASE_ID, ARGS)
