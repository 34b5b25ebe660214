"""mkdocs hooks: pages generated from the code when the site is built, offline.

- `flags/{script}.md` for every script in `cleanrl/`: its flags, read from the `Args` dataclass
  of the source file with `ast` (no import, so neither torch nor JAX is needed to build the
  site). `<!-- flags: PATH -->` in any page is replaced with the flags table of PATH's `Args`.
- `<!-- differences: collected -->` is replaced with every section of the script pages whose
  heading speaks of differences from the published reference.
- `<!-- floors: PACKAGE -->` is replaced with the picture of PACKAGE's floors (`FLOORS`): each
  floor's units, a subpackage with its modules.
- `<!-- imports: PACKAGE -->` is replaced with a table of PACKAGE's modules (a folder under the
  repository root), their lengths and the package modules each imports (read with `ast`).
- Script pages that other people have not written yet (`ppo_*.md`, and their `flags/` and
  `benchmark/` pages) are dropped from the nav with an info line instead of failing the build.

`python docs/hooks.py cleanrl/ppo_atari_envpool.py` prints the flags page of one script.
"""

from __future__ import annotations

import ast
import logging
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = REPO_ROOT / "cleanrl"
FLAGS_MARKER = re.compile(r"<!-- flags: (?P<path>\S+) -->")
DIFFERENCES_MARKER = "<!-- differences: collected -->"
IMPORTS_MARKER = re.compile(r"<!-- imports: (?P<package>[\w/]+) -->")
FLOORS_MARKER = re.compile(r"<!-- floors: (?P<package>[\w/]+) -->")
OPTIONAL_PAGE = re.compile(r"^(flags/|benchmark/)?ppo_\w+\.md$")

log = logging.getLogger("mkdocs.hooks.cleanrl")


# ---------------------------------------------------------------------------------------------
# Flags from the Args dataclass
# ---------------------------------------------------------------------------------------------


def args_fields(source: str, script_name: str = "") -> list[dict]:
    """The fields of `class Args` in `source`, in order: name, type, default (source text),
    docstring, and the group (the last `# comment` line above the field)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    cls = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Args"),
        None,
    )
    if cls is None:
        return []
    fields, group = [], "Experiment settings"
    previous_end = cls.body[0].lineno - 1 if cls.body else cls.lineno
    body = cls.body
    for i, node in enumerate(body):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        for line in lines[previous_end : node.lineno - 1]:
            comment = line.strip()
            if comment.startswith("#"):
                group = comment.lstrip("# ").strip()
        doc = ""
        nxt = body[i + 1] if i + 1 < len(body) else None
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            doc = " ".join(nxt.value.value.split())
            previous_end = nxt.end_lineno
        else:
            previous_end = node.end_lineno
        fields.append(
            {
                "name": node.target.id,
                "type": ast.unparse(node.annotation),
                "default": _default_text(node.value, script_name),
                "doc": doc,
                "group": group,
            }
        )
    return fields


def _default_text(value: ast.expr | None, script_name: str) -> str:
    if value is None:
        return "(required)"
    text = ast.unparse(value)
    if "__file__" in text:  # exp_name: the script's file name without `.py`
        return script_name or text
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
        for kw in value.keywords:
            if kw.arg == "default_factory":
                factory = kw.value
                return ast.unparse(factory.body if isinstance(factory, ast.Lambda) else factory)
            if kw.arg == "default":
                return ast.unparse(kw.value)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return value.value
    return text


def flags_table(source: str, script_name: str = "") -> str:
    """Markdown tables of the flags, one per group, as tyro spells them on the command line."""
    out, group = [], None
    for f in args_fields(source, script_name):
        if f["group"] != group:
            group = f["group"]
            computed = "runtime" in group.lower()
            title = group[0].upper() + group[1:]
            note = " (computed from the others; leave them unset)" if computed else ""
            out.append(
                f"\n**{title}**{note}\n\n| flag | type | default | meaning |\n|---|---|---|---|\n"
            )
        flag = "--" + f["name"].replace("_", "-")
        if f["type"] == "bool":
            flag = f"`{flag}` / `--no-{flag[2:]}`"
        else:
            flag = f"`{flag}`"
        doc = f["doc"].replace("|", "\\|")
        out.append(f"| {flag} | `{f['type']}` | `{f['default']}` | {doc} |\n")
    return "".join(out).lstrip("\n")


def flags_page(path: Path) -> str:
    name = path.stem
    rel = path.relative_to(REPO_ROOT).as_posix()
    return (
        f"# `{name}.py` flags\n\n"
        f"Generated from the docstrings of `Args` in `{rel}` when this site is built; "
        f"`python {rel} --help` prints the same flags. Booleans take `--flag` / `--no-flag`.\n\n"
        + flags_table(path.read_text(), name)
    )


def script_paths() -> list[Path]:
    return sorted(p for p in SCRIPTS_DIR.glob("*.py") if "class Args" in p.read_text())


# ---------------------------------------------------------------------------------------------
# Differences from the published reference, collected from the script pages
# ---------------------------------------------------------------------------------------------


def difference_sections(markdown: str) -> list[str]:
    """The sections of a page whose heading speaks of differences from the published script,
    each with one heading level more (they sit under the script's own heading)."""
    lines = markdown.splitlines()
    sections, current, level = [], None, 0
    in_code = False
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        heading = None if in_code else re.match(r"^(#{1,6})\s+(.*)$", line)
        if heading:
            depth = len(heading[1])
            if current is not None and depth <= level:
                sections.append("\n".join(current).strip())
                current = None
            text = heading[2]
            if (
                current is None
                and re.search(r"differ", text, re.I)
                and re.search(r"published|reference", text, re.I)
            ):
                current, level = [f"#{heading[1]} {text}"], depth
                continue
        if current is not None:
            current.append(("#" + line) if heading else line)
    if current is not None:
        sections.append("\n".join(current).strip())
    return sections


def collected_differences(docs_dir: Path, pages: list[str]) -> str:
    out = []
    for page in pages:
        path = docs_dir / page
        if not path.exists():
            continue
        sections = difference_sections(path.read_text())
        if not sections:
            continue
        out.append(f"## From [`{Path(page).stem}.py`]({page})\n\n" + "\n\n".join(sections) + "\n")
    if not out:
        return "_No script page lists differences yet._\n"
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Imports between the modules of a package
# ---------------------------------------------------------------------------------------------


def package_modules(package_dir: Path, flat: bool = False) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is named by its
    `__init__`). `flat`: a folder of scripts run as `python FOLDER/NAME.py` (`benchmark/`), whose
    modules import each other by their bare names (`from machine import Sizes`)."""
    root = package_dir if flat else package_dir.parent
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def import_graph(package_dir: Path, flat: bool = False) -> dict[str, list[str]]:
    """Each module of the package -> the modules of the same package it imports, anywhere in its
    code (a function-level import counts too, and one under `if TYPE_CHECKING:`); `flat` as in
    `package_modules`."""
    modules = package_modules(package_dir, flat)
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import sub` imports the module `sub` (a package's `__init__` runs
                # before any of its modules, as for `from pkg.sub import x`: not counted)
                subs = {f"{node.module}.{alias.name}" for alias in node.names}
                deps |= (subs & modules.keys()) | (
                    {node.module} if subs - modules.keys() else set()
                )
        graph[name] = sorted(d for d in deps if d in modules and d != name)
    return graph


def import_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A chain of modules that leads back to its first one, or None."""

    def visit(node, path):
        for dep in graph[node]:
            if dep == path[0]:
                return path + [dep]
            if dep not in path:
                found = visit(dep, path + [dep])
                if found:
                    return found
        return None

    for start in sorted(graph):
        found = visit(start, [start])
        if found:
            return found
    return None


# The floors of cleanrl_utils, lowest first: a package or top-level module imports from its own
# floor and lower ones only (tests/test_docs.py), and docs/layout.md draws them from here. What
# a command says and how it ends sit at the bottom; the checks of bad input above them; the
# games and the training steps; the files; many processes; the run lifecycle; the tools; the Hub;
# and the steps after training, which call the tools and the Hub, on top.
FLOORS = {
    "console": ["console", "entry"],
    "checks": ["checks"],
    "games, steps": ["envs", "ppo"],
    "files": ["files"],
    "processes": ["distributed", "torchrun"],
    "lifecycle": ["run"],
    "tools": ["evals", "report", "convert", "benchmark", "tuner"],
    "hub": ["huggingface", "enjoy"],
    "after training": ["after_training"],
}


# The floors of benchmark/, a folder of command lines (not a package: each runs as `python
# benchmark/NAME.py`, its folder first on the import path), lowest first, as FLOORS: the machine's
# line and bounds; throughput's flags and the scripts it knows; its measuring and reporting
# halves, which take those flags; the command lines on top. Below them all, cleanrl_utils.
BENCHMARK_FLOORS = {
    "machine": ["machine"],
    "flags": ["throughput_args"],
    "halves": ["throughput_measure", "throughput_report"],
    "command lines": ["throughput", "jax_lockstep", "tune_ppo_atari_envpool", "padding_cost"],
}


def unit(module: str) -> str:
    """The module or subpackage of the package that `module` belongs to (`evals` for
    `cleanrl_utils.files.model_file`); the package itself for its `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(module: str, floors: dict[str, list[str]] = FLOORS) -> int | None:
    """The index in `floors` of the floor of `module`'s unit; None when `floors` does not name
    it."""
    for i, units in enumerate(floors.values()):
        if unit(module) in units:
            return i
    return None


def unit_graph(graph: dict[str, list[str]]) -> dict[str, list[str]]:
    """The import graph between the package's modules and subpackages (a subpackage is one
    node); the package's own `__init__` (which imports nothing) is left out."""
    units: dict[str, set[str]] = {}
    for name, deps in graph.items():
        if "." not in name:
            continue
        units.setdefault(unit(name), set()).update(unit(d) for d in deps if "." in d)
    return {name: sorted(deps - {name}) for name, deps in units.items()}


def floors_picture(package_dir: Path, floors: dict[str, list[str]] = FLOORS) -> str:
    """The floors of the package drawn as text, top floor first: each floor's name, then its
    units, a subpackage with its modules (`run/: lifecycle, resume, ...`), wrapped at 100
    characters under the units' column."""
    modules = package_modules(package_dir)
    lines = []
    for name, units in reversed(floors.items()):
        words = []
        for u in units:
            subs = [
                m.rsplit(".", 1)[1]
                for m in modules
                if m.startswith(f"{package_dir.name}.{u}.") and m.count(".") == 2
            ]
            subs = [m for m in subs if m not in ("__init__", "__main__")]
            words.append(f"{u}/: {', '.join(subs)};" if subs else f"{u};")
        words[-1] = words[-1].rstrip(";")
        line, out = "", []
        for word in " ".join(words).split(" "):
            if line and len(line) + 1 + len(word) > 100 - 16:
                out.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        out.append(line)
        lines.append(f"{name:<16}{out[0]}")
        lines += [" " * 16 + rest for rest in out[1:]]
    return "\n".join(lines)


def imports_table(package_dir: Path) -> str:
    graph = import_graph(package_dir)
    modules = package_modules(package_dir)
    names = list(FLOORS)
    rows = ["| module | floor | lines | imports from the package |", "|---|---|---:|---|"]
    for name in sorted(graph):
        lines = len(modules[name].read_text().splitlines())
        deps = ", ".join(f"`{d}`" for d in graph[name]) or "nothing"
        floor = floor_of(name)
        rows.append(f"| `{name}` | {'' if floor is None else names[floor]} | {lines} | {deps} |")
    cycle = import_cycle(graph) or import_cycle(unit_graph(graph))
    note = f"Import circle: {' -> '.join(cycle)}" if cycle else "No module imports itself back."
    return "\n".join(rows) + f"\n\n{note}"


# ---------------------------------------------------------------------------------------------
# mkdocs events
# ---------------------------------------------------------------------------------------------


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav or []:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages += _nav_pages(value)
        elif isinstance(value, str):
            pages.append(value)
    return pages


def _filter_nav(nav, exists):
    out = []
    for item in nav:
        title, value = next(iter(item.items())) if isinstance(item, dict) else (None, item)
        if isinstance(value, list):
            value = _filter_nav(value, exists)
            if not value:
                continue
        elif isinstance(value, str) and not exists(value):
            if OPTIONAL_PAGE.match(value):
                log.info("nav: %s is not written yet; left out of the nav", value)
                continue
        out.append({title: value} if title is not None else value)
    return out


def on_config(config):
    docs_dir = Path(config["docs_dir"])
    generated = {f"flags/{p.stem}.md" for p in script_paths()}
    config["nav"] = _filter_nav(
        config["nav"] or [], lambda page: page in generated or (docs_dir / page).exists()
    )
    return config


def on_files(files, config):
    from mkdocs.structure.files import File

    for path in script_paths():
        uri = f"flags/{path.stem}.md"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, content=flags_page(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    def flags(match):
        path = REPO_ROOT / match["path"]
        if not path.exists():
            log.warning("%s: no file %s for its flags table", page.file.src_uri, match["path"])
            return ""
        return flags_table(path.read_text(), path.stem)

    markdown = FLAGS_MARKER.sub(flags, markdown)
    markdown = IMPORTS_MARKER.sub(lambda m: imports_table(REPO_ROOT / m["package"]), markdown)
    markdown = FLOORS_MARKER.sub(
        lambda m: f"```text\n{floors_picture(REPO_ROOT / m['package'])}\n```", markdown
    )
    if DIFFERENCES_MARKER in markdown:
        pages = [p for p in _nav_pages(config["nav"]) if re.match(r"^ppo_\w+\.md$", p)]
        markdown = markdown.replace(
            DIFFERENCES_MARKER, collected_differences(Path(config["docs_dir"]), pages)
        )
    return markdown


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(flags_page(Path(arg).resolve()))
