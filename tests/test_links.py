"""Every reference to a file resolves inside the repository: the relative links of the markdown
pages, and every mention of a repository path (`docs/...md`, `cleanrl/...py`, `benchmark/...`,
`requirements/...txt`) or of a bare file name (`FACTS.md`) in README.md, docs/,
requirements/, benchmark/, .ci/ and the code's comments and strings. A reader who follows one
finds the file; a file that is not in the repository is never cited as if it were.

Also: the docs say the same install and test commands as the README, which CI runs."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
import tomllib
from pathlib import Path

import pytest
from scripts_testing import REPO_ROOT

# Known exceptions, each with its reason (none at present).
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()

# Files the code writes when it runs, named in the docs as outputs, never as sources.
OUTPUTS = {
    "docs/throughput_table.md",  # `benchmark/throughput.py --markdown docs/throughput_table.md`
    "t.md",  # the same, in benchmark/throughput.py's docstring and docs/throughput.md
    "windows.md",  # one of the report tool's output files (`--windows`)
    "evaluation.md",  # the report tool's evaluation paragraph (the paper kit)
    "trials.md",  # the tuner's table of a study's trials, in tuner_logs/STUDY/
    "trials.csv",  # the same table as CSV
}
# Files of other projects, cited with the project they belong to.
ELSEWHERE = {
    ("cleanrl_utils/data/atari_human_random_scores.csv", "atari_data.py"),  # rliable's
    ("README.md", "ppo_atari_multigpu.py"),  # CleanRL's, in "What is not here"
    # the Atari-5 paper's code (maitchison/Atari-5): the data its models were fitted on
    ("cleanrl_utils/data/atari5_fit_scores.csv", "dataset.csv"),
    ("cleanrl_utils/report/atari5.py", "dataset.csv"),
    # a Hugging Face Hub repository of CleanRL's (entity/name), not a path of ours
    ("docs/sharing.md", "cleanrl/Breakout-v5-ppo_atari_envpool_xla_jax_scan-seed1"),
}
# Placeholders in example commands: `python cleanrl/SCRIPT.py --env-id ENV`,
# `requirements/requirements-X.txt`.
PLACEHOLDERS = {"SCRIPT", "RUN", "ENV", "NAME", "X"}

SCANNED = ["README.md", "docs", "requirements", "benchmark", ".ci", "cleanrl", "cleanrl_utils"]
TEXT_SUFFIXES = {".md", ".txt", ".sh", ".slurm_template", ".csv", ""}
TOP_DIRS = r"(?:\.ci|docs|cleanrl|cleanrl_utils|benchmark|requirements|tests)"
# a path under one of the repository's folders, not part of a longer path or URL
PATH_MENTION = re.compile(rf"(?<![\w./-]){TOP_DIRS}/[\w./-]*[\w/]")
# a bare file name: what a reader would look for by name
FILE_SUFFIXES = r"(?:md|py|txt|sh|csv|toml|yml|yaml|slurm_template)"
BARE_NAME = re.compile(rf"(?<![\w./{{}}-])[A-Za-z_][\w-]*\.{FILE_SUFFIXES}\b(?![\w/-])")
# an absolute path to a file: outside the repository, wherever the repository is cloned
ABSOLUTE_FILE = re.compile(rf"(?<![\w.:/~-])/[\w./-]+\.{FILE_SUFFIXES}\b")
MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE_SUFFIXES = {".py"}


def tracked_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [REPO_ROOT / line for line in out.splitlines() if (REPO_ROOT / line).exists()]


FILES = tracked_files()
RELATIVE = {f.relative_to(REPO_ROOT).as_posix() for f in FILES}
# pages docs/hooks.py generates when the site is built: flags/{script}.md for every script
GENERATED = {
    f"docs/flags/{Path(p).stem}.md"
    for p in RELATIVE
    if p.startswith("cleanrl/ppo_") and p.endswith(".py")
}
FOLDERS = {Path(p).parent.as_posix() for p in RELATIVE | GENERATED}
FOLDERS |= {f.rsplit("/", i)[0] for f in FOLDERS for i in range(1, f.count("/") + 1)}
BASENAMES = {Path(p).name for p in RELATIVE | GENERATED}


def exists(path: str) -> bool:
    path = path.rstrip("/").removeprefix("./")
    return path in RELATIVE or path in GENERATED or path in FOLDERS or path in OUTPUTS


def scanned_files() -> list[Path]:
    chosen = []
    for f in FILES:
        rel = f.relative_to(REPO_ROOT).as_posix()
        if not any(rel == s or rel.startswith(s + "/") for s in SCANNED):
            continue
        if f.suffix in CODE_SUFFIXES or f.suffix in TEXT_SUFFIXES:
            chosen.append(f)
    return sorted(chosen)


def prose(path: Path) -> str:
    """What a reader reads in `path`: all of a text file; a Python file's comments and the
    strings that are prose (docstrings, messages: those with a space; a string without one is a
    name the code uses, such as a file it writes); a CSV file's comment lines."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        parts = [
            tok.string
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT
        ]
        parts += [
            node.value
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " in node.value
        ]
        return "\n".join(parts)
    if path.suffix == ".csv":
        return "\n".join(line for line in text.splitlines() if line.startswith("#"))
    return text


def broken_references(path: Path, text: str) -> list[str]:
    """The references in `text` (read from `path`) that do not resolve, each as it is written."""
    rel = path.relative_to(REPO_ROOT)
    here = rel.parent.as_posix()
    bad = []
    if path.suffix == ".md":
        for target in MD_LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL (http:, mailto:) or an anchor on the same page
            file_part = target.split("#", 1)[0]
            joined = (Path(here) / file_part).as_posix() if here != "." else file_part
            if not exists(_normalise(joined)):
                bad.append(target)
    for match in PATH_MENTION.finditer(text):
        mention = match.group(0).rstrip(".")
        if (
            PLACEHOLDERS & set(re.split(r"[/._-]", mention))
            or (rel.as_posix(), mention) in ELSEWHERE
        ):
            continue
        in_docs = f"docs/{mention}" if here.startswith("docs") else None
        if not exists(mention) and not (in_docs and exists(in_docs)):
            bad.append(mention)
    bad += ABSOLUTE_FILE.findall(text)
    for match in BARE_NAME.finditer(text):
        name = match.group(0)
        if (
            name not in BASENAMES
            and name not in OUTPUTS
            and (rel.as_posix(), name) not in ELSEWHERE
        ):
            bad.append(name)
    return list(dict.fromkeys(bad))  # once each, in order


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def all_broken() -> dict[str, list[str]]:
    found = {}
    for path in scanned_files():
        rel = path.relative_to(REPO_ROOT).as_posix()
        bad = [
            ref
            for ref in broken_references(path, prose(path))
            if (rel, ref) not in KNOWN_EXCEPTIONS
        ]
        if bad:
            found[rel] = sorted(set(bad))
    return found


def test_every_file_reference_resolves_inside_the_repository():
    assert all_broken() == {}


def test_known_exceptions_are_still_there():
    """An exception whose reference has gone (the other branch merged) must be removed."""
    stale = [
        (rel, ref)
        for rel, ref in KNOWN_EXCEPTIONS
        if (REPO_ROOT / rel).exists()
        and ref not in broken_references(REPO_ROOT / rel, prose(REPO_ROOT / rel))
    ]
    assert stale == []


@pytest.mark.parametrize(
    "text, broken",
    [
        ("see FACTS.md for the numbers", ["FACTS.md"]),
        ("see `FACTS.md`", ["FACTS.md"]),
        ("copied from /home/me/notes/FACTS.md, which", ["/home/me/notes/FACTS.md"]),
        ("[install](docs/installation_missing.md)", ["docs/installation_missing.md"]),
        ("[layout](docs/layout.md#the-modules) and `cleanrl/ppo_atari.py`", []),
        ("`benchmark/nothing.sh` and requirements/requirements-none.txt", None),
        ("https://github.com/vwxyzjn/cleanrl/blob/master/cleanrl/ppo_missing.py", []),
        ("`python benchmark/throughput.py --markdown docs/throughput_table.md`", []),
        ("`runs/RUN/ppo_atari_envpool.cleanrl_model`, `config.json`", []),
        ("`python cleanrl/SCRIPT.py --env-id ENV`", []),
    ],
)
def test_the_checker_finds_what_a_reader_would_miss(text, broken):
    found = broken_references(REPO_ROOT / "README.md", text)
    if broken is None:
        assert found == ["benchmark/nothing.sh", "requirements/requirements-none.txt"]
    else:
        assert found == broken


def test_docs_pages_resolve_relative_to_their_folder():
    page = REPO_ROOT / "docs" / "benchmark" / "notes.md"
    assert broken_references(page, "[the report tool](../report.md)") == []
    assert broken_references(page, "[flags](../flags/ppo_atari.md)") == []  # generated
    assert broken_references(page, "[nothing](report_missing.md)") == ["report_missing.md"]


# ---------------------------------------------------------------------------------------------
# The same commands everywhere
# ---------------------------------------------------------------------------------------------


def readme_ci_command() -> str:
    """The command .ci/run runs: the first bash block after the README's CI marker."""
    text = (REPO_ROOT / "README.md").read_text()
    after = text.split("<!-- ci: test command", 1)[1]
    return after.split("```bash\n", 1)[1].split("\n", 1)[0]


def test_getting_started_shows_the_readme_commands_exactly():
    page = (REPO_ROOT / "docs" / "getting_started.md").read_text()
    assert readme_ci_command() in page
    readme = (REPO_ROOT / "README.md").read_text()
    train = readme.split("```bash\n", 1)[1].split("\n", 1)[0]  # the README's first command
    assert train in page


def test_the_test_command_installs_every_extra():
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    named = re.search(r'-e "\.\[([\w,]+)\]"', readme_ci_command()).group(1).split(",")
    assert sorted(named) == sorted(extras)
    for page in ("README.md", "docs/getting_started.md"):
        text = (REPO_ROOT / page).read_text()
        assert all(f"`{extra}`" in text for extra in extras), page  # the extras it lists
