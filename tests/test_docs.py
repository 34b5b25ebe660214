"""The docs site: the generated flags pages say what `--help` says, `mkdocs build --strict`
passes (where mkdocs is installed) and the built site browses from its files, the pages agree
with the scripts in `cleanrl/`, and the import floors hold."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest
from scripts_testing import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "docs"))
import hooks  # noqa: E402

SCRIPTS = hooks.script_paths()


def load_args_class(path):
    spec = importlib.util.spec_from_file_location(f"_docs_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through it
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module.Args


@pytest.mark.parametrize(
    "path",
    SCRIPTS + [REPO_ROOT / "cleanrl_utils" / "report" / "options.py"],
    ids=lambda p: p.stem,
)
def test_flags_page_lists_every_field_with_its_default_and_docstring(path):
    fields = {f["name"]: f for f in hooks.args_fields(path.read_text(), path.stem)}
    real = dataclasses.fields(load_args_class(path))
    assert list(fields) == [f.name for f in real]
    for f in real:
        text = fields[f.name]["default"]
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if f.name == "exp_name" and path in SCRIPTS:  # (the report's selects exp names)
            assert text == path.stem == default
        elif isinstance(default, str):
            assert text == default
        else:
            assert ast.literal_eval(text) == default, f.name
        assert fields[f.name]["doc"], f"{f.name} has no docstring"
    table = hooks.flags_table(path.read_text(), path.stem)
    assert table.count("| `--") == len(real)


def test_differences_are_collected_from_the_script_pages():
    text = hooks.collected_differences(REPO_ROOT / "docs", ["ppo_atari_envpool.md"])
    assert text.startswith("## From [`ppo_atari_envpool.py`](ppo_atari_envpool.md)")
    assert "### Deliberate differences from the published CleanRL script" in text
    assert "Masked out of every loss and statistic" in text
    sections = hooks.difference_sections("# a\n## Differences from the EnvPool script\nx\n")
    assert sections == []  # only differences from the published reference


@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="mkdocs is not installed")
def test_site_builds_strict(tmp_path):
    proc = subprocess.run(
        ["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    site = tmp_path / "site"
    assert (site / "flags" / "ppo_atari_envpool.html").exists()
    # browsable from the files (file://, no server): every link and asset of every page names
    # a file that is there, never a folder (which a browser shows as a listing)
    broken = []
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")  # (a server's page)
    for page in pages:
        for target in LinkTargets.of(page.read_text()):
            path = target.split("#")[0].split("?")[0]
            if not path or re.match(r"^[a-z]+:", path):  # an anchor, or another site
                continue
            if not (page.parent / path).is_file():
                broken.append((page.relative_to(site).as_posix(), target))
    assert len(pages) > 30 and broken == [], broken[:20]
    text = (site / "getting_started.html").read_text()
    assert 'href="installation.html"' in text and "stylesheets/extra.css" in text
    css = (site / "stylesheets" / "extra.css").read_text()
    assert ".language-bash pre > code" in css and "white-space: pre-wrap" in css


class LinkTargets(HTMLParser):
    """The targets of a page's links and assets: `href` and `src` attributes."""

    def __init__(self):
        super().__init__()
        self.targets = []

    def handle_starttag(self, tag, attrs):
        self.targets += [value for name, value in attrs if name in ("href", "src") and value]

    @classmethod
    def of(cls, html: str) -> list[str]:
        parser = cls()
        parser.feed(html)
        return parser.targets


def test_cleanrl_utils_has_no_import_circle(tmp_path):
    graph = hooks.import_graph(REPO_ROOT / "cleanrl_utils")
    assert (
        "cleanrl_utils.files.state_file" in graph["cleanrl_utils.run.lifecycle"]
    )  # the graph sees imports
    assert hooks.import_cycle(graph) is None, hooks.import_cycle(graph)
    # and it finds one where there is one
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import x\n")
    (package / "b.py").write_text("def f():\n    import pkg.c\n")
    (package / "c.py").write_text("from pkg import a\n")
    assert hooks.import_cycle(hooks.import_graph(package)) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_cleanrl_utils_floors_import_nothing_from_higher_ones():
    """Between subpackages too (a subpackage is one node), no circle, and each module imports
    from its own floor (docs/hooks.py FLOORS) or lower ones: the evaluator knows nothing of the
    Hub, the bad-input checks nothing of either, the run lifecycle nothing of the Hub, and the
    steps after training are the top."""
    graph = hooks.import_graph(REPO_ROOT / "cleanrl_utils")
    units = hooks.unit_graph(graph)
    assert "huggingface" in units["after_training"]  # subpackages are seen as one node
    assert hooks.import_cycle(units) is None, hooks.import_cycle(units)
    unplaced = sorted({hooks.unit(m) for m in graph if "." in m and hooks.floor_of(m) is None})
    assert not unplaced, f"give {unplaced} a floor in docs/hooks.py FLOORS"
    upward = [
        (module, dep)
        for module, deps in graph.items()
        for dep in deps
        if "." in module and "." in dep and hooks.floor_of(dep) > hooks.floor_of(module)
    ]
    assert upward == [], "these import from a higher floor"
    assert hooks.import_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]


def test_benchmark_has_no_import_circle_and_its_floors_point_down(tmp_path):
    """benchmark/ is a folder of command lines whose modules import each other by bare name: no
    circle among them (`if TYPE_CHECKING:` imports count), each imports from its own floor
    (docs/hooks.py BENCHMARK_FLOORS) or lower ones, and no module of cleanrl_utils imports one of
    them (the package is the floor below benchmark/). No module edits `sys.path`."""
    folder = REPO_ROOT / "benchmark"
    graph = hooks.import_graph(folder, flat=True)
    assert "throughput_args" in graph["throughput_measure"]  # the graph sees bare-name imports
    assert hooks.import_cycle(graph) is None, hooks.import_cycle(graph)
    floors = hooks.BENCHMARK_FLOORS
    unplaced = sorted(m for m in graph if hooks.floor_of(m, floors) is None)
    assert not unplaced, f"give {unplaced} a floor in docs/hooks.py BENCHMARK_FLOORS"
    upward = [
        (module, dep)
        for module, deps in graph.items()
        for dep in deps
        if hooks.floor_of(dep, floors) > hooks.floor_of(module, floors)
    ]
    assert upward == [], "these import from a higher floor"
    imported = set()  # the top-level names the package's modules import
    for path in hooks.package_modules(REPO_ROOT / "cleanrl_utils").values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert not imported & set(graph), imported & set(graph)
    # the folder is first on the path when one runs; the package is installed: no path edits
    edits = [p.name for p in folder.glob("*.py") if "sys.path" in p.read_text()]
    assert edits == [], edits
    # and a circle through `if TYPE_CHECKING:` is found, as the one benchmark/ had
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from b import X\n"
    )
    (tmp_path / "b.py").write_text("from a import Y\n")
    assert hooks.import_cycle(hooks.import_graph(tmp_path, flat=True)) == ["a", "b", "a"]


def test_published_page_shows_the_published_data():
    """docs/published.md and the file the report tool compares with hold the same numbers."""
    import csv

    data = REPO_ROOT / "cleanrl_utils" / "data" / "published_ppo_atari.csv"
    lines = [line for line in data.read_text().splitlines() if not line.startswith("#")]
    expected = []
    for row in csv.DictReader(lines):
        minutes = float(row["runtime_minutes"])
        expected.append(
            [
                f"`{row['script']}`",
                row["env_id"],
                f"{row['return_mean']} ± {row['return_std']}",
                row["runtime_minutes"],
                f"{round(int(row['total_timesteps']) / (minutes * 60)):,}",
            ]
        )
    page = (REPO_ROOT / "docs" / "published.md").read_text()
    table = page.split("## Returns and runtimes", 1)[1].split("\n\n", 2)[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
    assert rows == expected
    assert {r["seeds"] for r in csv.DictReader(lines)} == {"3"}
    assert {r["total_timesteps"] for r in csv.DictReader(lines)} == {"10000000"}


SIDEBAR_CHARS = 22  # about what the theme's sidebar shows of a word (it wraps at spaces) before "…"
NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve".split()
# "the five scripts", "all 8 PPO Atari scripts", "five single-file scripts": a claim of how many
# scripts there are. ("The two scripts" on a page compares a pair, and "the two JAX scripts" or
# "the four torch scripts" counts a kind: neither is counted here.)
SCRIPT_COUNT = re.compile(
    r"\b(?:(?:the|all)\s+(\w+)\s+(?:single-file\s+)?(?:PPO\s+)?(?:Atari\s+)?scripts"
    r"|(\w+)\s+single-file\s+scripts)\b",
    re.IGNORECASE,
)


def nav_scripts() -> dict[str, str]:
    """The Scripts section of the navigation: each script's file name -> its label, in order."""
    import yaml

    nav = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())["nav"]
    (sections,) = [item["Scripts"] for item in nav if isinstance(item, dict) and "Scripts" in item]
    labels = {}
    for section in sections:
        ((label, pages),) = section.items()
        (overview,) = [page["Overview"] for page in pages if "Overview" in page]
        labels[overview.removesuffix(".md") + ".py"] = label
    return labels


def test_the_navigation_names_each_script_shortly_and_distinctly():
    """Every script of cleanrl/ has a section, with a label the sidebar shows whole (no word
    longer than it shows), and its page's heading names the script's file."""
    labels = nav_scripts()
    assert sorted(labels) == sorted(p.name for p in SCRIPTS)
    assert len(set(labels.values())) == len(labels), labels
    for script, label in labels.items():
        assert max(len(word) for word in label.split()) <= SIDEBAR_CHARS, label
        assert len(label) <= SIDEBAR_CHARS and "…" not in label, label
        page = (REPO_ROOT / "docs" / script).with_suffix(".md").read_text()
        heading = page.splitlines()[0]
        assert heading.startswith("# ") and f"`{script}`" in heading, script


def test_every_page_agrees_with_the_scripts_in_cleanrl():
    """One list, the files of cleanrl/: the home page's and the README's tables of scripts list
    every one, in the navigation's order, and no page (the README, docs/, the benchmark's
    docstrings) says there are more or fewer."""
    order = list(nav_scripts())
    home = (REPO_ROOT / "docs" / "index.md").read_text()
    rows = re.findall(r"^\| \[`(\w+\.py)`\]\((\w+)\.md\) \|", home, re.M)
    assert [name for name, _ in rows] == order, "docs/index.md's table of scripts"
    assert all(name == f"{page}.py" for name, page in rows)  # each links to its own page
    readme = (REPO_ROOT / "README.md").read_text()
    assert re.findall(r"^\| `cleanrl/(\w+\.py)` \|", readme, re.M) == order, "README's table"
    count = len(SCRIPTS)
    pages = [REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md")]
    pages += (REPO_ROOT / "benchmark").glob("*.py")  # (docs/benchmark/ is the report tool's)
    claims = []
    for page in pages:
        text = " ".join(page.read_text().split())
        for match in SCRIPT_COUNT.finditer(text):
            word = (match[1] or match[2]).lower()
            number = (
                NUMBERS.index(word) if word in NUMBERS else int(word) if word.isdigit() else None
            )
            if number is not None and number > 2 and number != count:
                claims.append((page.relative_to(REPO_ROOT).as_posix(), match[0]))
    assert claims == [], f"cleanrl/ has {count} scripts"
    # the test sees a wrong count where there is one
    assert SCRIPT_COUNT.search("the throughput of the five scripts")[1] == "five"
    assert SCRIPT_COUNT.search("`cleanrl/`: nine single-file scripts.")[2] == "nine"
    assert SCRIPT_COUNT.search("The two scripts' curves and the two JAX scripts")[1] == "two"


def test_the_readme_and_the_long_runs_page_give_the_measured_cpu_speed_and_time():
    """Both quote the steps per second that docs/throughput.md measured for ppo_atari_envpool.py
    on 2 idle cores, and the hours 10M steps take at that speed."""
    import re

    throughput = (REPO_ROOT / "docs" / "throughput.md").read_text()
    sps = int(re.search(r"^\| `ppo_atari_envpool` \| (\d+) \|", throughput, re.M)[1])
    hours = round(10_000_000 / sps / 3600)
    for page in ("README.md", "docs/long_runs.md"):
        text = " ".join((REPO_ROOT / page).read_text().split())
        assert f"about {hours} hours" in text and f"({sps} steps/s measured" in text, page
        other = [n for n in re.findall(r"\b(\d+) steps/s", text) if int(n) != sps]
        assert not other, (page, other)  # no other speed


def test_the_layout_picture_is_drawn_from_the_floors():
    """docs/layout.md's picture of the floors of `cleanrl_utils` is drawn from FLOORS when the
    site is built: each floor's line names its units, and every module and subpackage of the
    package is on it, a subpackage with its modules."""
    text = (REPO_ROOT / "docs" / "layout.md").read_text()
    assert "<!-- floors: cleanrl_utils -->" in text
    package = REPO_ROOT / "cleanrl_utils"
    picture = hooks.floors_picture(package)
    drawn, floor = {}, None
    for line in picture.splitlines():
        floor = line[:16].strip() or floor
        drawn.setdefault(floor, set()).update(w.strip(",:/;") for w in line[16:].split())
    assert list(drawn) == list(reversed(hooks.FLOORS))  # (drawn top floor first)
    for name, units in hooks.FLOORS.items():
        assert set(units) <= drawn[name], (name, set(units) - drawn[name])
    everything = set().union(*drawn.values())
    modules = {p.stem for p in package.rglob("*.py")} - {"__init__", "__main__"}
    units = {p.parent.name for p in package.glob("*/__init__.py")}
    assert modules | units <= everything, (modules | units) - everything
    assert max(len(line) for line in picture.splitlines()) <= 100
    rendered = hooks.on_page_markdown(text, None, {"nav": []}, None)
    assert picture in rendered and "<!-- floors:" not in rendered
    # and the table below it has one row for each package and top-level module, no other
    table = text.split("| package | what it is for |", 1)[1].split("\n\n", 1)[0]
    rows = set(re.findall(r"^\| `(\w+)/?`(?:, `(\w+)/?`)? \|", table, re.M))
    listed = {name for row in rows for name in row if name}
    assert listed == set().union(*hooks.FLOORS.values()), listed ^ set().union(
        *hooks.FLOORS.values()
    )
