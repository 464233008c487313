"""Every machine installs the same packages: constraints.txt pins each one a fresh install of
requirements-dev.txt brings (tools/lock.sh makes it), and every install command uses it
(issue 18.21: unpinned requirements let each fresh machine resolve a different set)."""

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def requirements(name: str) -> list[Requirement]:
    """The requirements in a requirements file, following its -r lines."""
    out = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-r "):
            out += requirements(line[3:].strip())
        elif line:
            out.append(Requirement(line))
    return out


def pins() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.!]*)", line)
        assert m, f"constraints.txt: {line!r} is not name==version (no local label, no range)"
        out[canonicalize_name(m.group(1))] = m.group(2)
    return out


def test_every_requirement_is_pinned_to_a_version_it_allows():
    pinned = pins()
    for req in requirements("requirements-dev.txt"):
        name = canonicalize_name(req.name)
        assert name in pinned, f"{req.name} is not in constraints.txt: bash tools/lock.sh"
        assert req.specifier.contains(pinned[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pinned[name]}, outside {req}"
    assert pinned["torch"] == "2.13.0"


def test_the_pins_are_closed_under_dependencies():
    """Whatever an installed pinned package needs on this machine is pinned too (checked for
    the packages installed at their pinned version, as after the README's command)."""
    pinned = pins()
    environment = {"extra": ""}
    checked = 0
    for name, version in pinned.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version.split("+")[0] != version:
            continue
        checked += 1
        for text in dist.requires or []:
            dep = Requirement(text)
            if dep.marker is None or dep.marker.evaluate(environment):
                assert canonicalize_name(dep.name) in pinned or \
                    canonicalize_name(dep.name) in {"pip", "setuptools"}, \
                    f"{name} needs {dep.name}, which constraints.txt does not pin"
    assert checked >= len(pinned) // 2, "most pinned packages are not installed at their pins"


def test_every_install_command_uses_the_constraints():
    commands = re.findall(r"```bash\n(.*?)\n```", README, re.S)
    assert 'pip install -c constraints.txt -e ".[all]"' in commands[0]
    assert "pip install -c constraints.txt -r requirements-dev.txt" in commands[1]
    assert "pip install -q -c constraints.txt -r requirements-dev.txt" in \
        (ROOT / ".ci" / "run").read_text()
    assert "pip install -c constraints.txt -r requirements.txt" in \
        (ROOT / "Dockerfile").read_text()
    assert "bash tools/lock.sh" in README and (ROOT / "tools" / "lock.sh").exists()
