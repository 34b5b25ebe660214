"""The install files agree: pyproject.toml holds ranges, requirements/ the exact pins, every pin
lies inside its range (so `pip install -r requirements/X.txt -e .` never fights itself), and
requirements/requirements-lowest.txt pins each light package at its lower bound, which
`.ci/lowest-versions` then tests."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from scripts_testing import REPO_ROOT

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
REQUIREMENTS = REPO_ROOT / "requirements"
# kept at a known-good pin in the lowest-versions file, not at their lower bound (see its header)
NOT_AT_LOWER_BOUND = {"torch", "pytest"}
# the extras that file covers; the JAX, hub and optuna extras (not tested at their bounds) and the dev
# tools (not used by the code) are not in it
LOWEST_EXTRAS = ["envpool", "atari", "video", "report"]


def declared() -> dict[str, Requirement]:
    reqs = list(PYPROJECT["dependencies"])
    for extra in PYPROJECT["optional-dependencies"].values():
        reqs += extra
    return {canonicalize_name(Requirement(r).name): Requirement(r) for r in reqs}


def pins(path) -> dict[str, str]:
    """name -> version of the `name==version` lines of one requirements file (not its -r files)."""
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, version = re.fullmatch(r"([\w.\-\[\]]+)==([\w.+]+)", line).groups()
        found[canonicalize_name(name)] = version
    return found


def lower_bound(req: Requirement) -> str | None:
    bounds = [s.version for s in req.specifier if s.operator == ">="]
    return bounds[0] if len(bounds) == 1 else None


def test_pyproject_has_ranges_and_no_exact_pins():
    for name, req in declared().items():
        assert not any(s.operator in ("==", "===") for s in req.specifier), name
        assert lower_bound(req) is not None, f"{name}: give the lowest version the code supports"


def test_every_pin_lies_inside_the_range_of_pyproject():
    ranges = declared()
    for path in sorted(REQUIREMENTS.glob("*.txt")):
        for name, version in pins(path).items():
            if name in ranges:
                assert ranges[name].specifier.contains(version, prereleases=True), (
                    f"{path.name}: {name}=={version} is outside pyproject.toml's {ranges[name]}"
                )


def test_torch_pin_is_the_one_the_range_admits_here():
    """The base file's torch pin (2.13.0, a local CPU wheel on this project's machines) lies in
    the range, so installing the pins and then the project installs no other torch."""
    assert pins(REQUIREMENTS / "requirements.txt")["torch"] == "2.13.0"
    assert declared()["torch"].specifier.contains("2.13.0")


def test_lowest_versions_file_pins_each_light_package_at_its_lower_bound():
    lowest = pins(REQUIREMENTS / "requirements-lowest.txt")
    ranges = declared()
    expected = [canonicalize_name(Requirement(r).name) for r in PYPROJECT["dependencies"]]
    for extra in LOWEST_EXTRAS:
        expected += [
            canonicalize_name(Requirement(r).name)
            for r in PYPROJECT["optional-dependencies"][extra]
        ]
    for name in expected:
        assert name in lowest, f"{name} is missing from requirements-lowest.txt"
        if name not in NOT_AT_LOWER_BOUND:
            assert Version(lowest[name]) == Version(lower_bound(ranges[name])), (
                f"{name}: requirements-lowest.txt has {lowest[name]}, pyproject.toml {ranges[name]}"
            )
    assert lowest["torch"] == pins(REQUIREMENTS / "requirements.txt")["torch"]
    assert lowest["pytest"] == pins(REQUIREMENTS / "requirements-dev.txt")["pytest"]


def test_requires_python_is_what_the_docs_say():
    spec = PYPROJECT["requires-python"]
    for page in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "installation.md"):
        text = page.read_text()
        assert f'`requires-python = "{spec}"`' in text, page.name
        assert "tested on Python 3.11" in text, page.name


def test_the_docs_write_the_install_command_of_the_newer_pythons_with_every_extra():
    """Python 3.12 and 3.13 install the ranges (no pins) with every extra, written out as a
    command in the README and on the install page, with what it downloads."""
    extras = set(PYPROJECT["optional-dependencies"])
    for page in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "installation.md"):
        text = page.read_text()
        commands = re.findall(r'pip install -e "\.\[([a-z,]+)\]"', text)
        assert any(set(c.split(",")) == extras for c in commands), (page.name, commands)
        assert "5.2 GB" in text and "337 MB" in text and "matplotlib" in text, page.name
    assert "about 3 GB" not in (REPO_ROOT / "docs" / "installation.md").read_text()


def test_the_wheel_holds_every_package_and_the_data(tmp_path):
    """A non-editable install (`pip install .`, a wheel) carries every package of the two top
    folders, `cleanrl_utils.run` and each added later included, and the reference returns."""
    source = tmp_path / "source"  # (built from a copy: a build in the tree leaves build/ there)
    for name in ("cleanrl", "cleanrl_utils"):
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO_ROOT / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*command, "-w", str(tmp_path), str(source)], capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr[-4000:]
    (wheel,) = tmp_path.glob("cleanrl-*.whl")
    files = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        path.relative_to(REPO_ROOT).as_posix()
        for top in ("cleanrl", "cleanrl_utils")
        for path in (REPO_ROOT / top).rglob("*")
        if path.suffix in (".py", ".csv") and "__pycache__" not in path.parts
    }
    assert "cleanrl_utils/run/__init__.py" in expected
    assert expected <= files, sorted(expected - files)
