"""Markdown tables and the number formats of the report (also used by `benchmark/throughput.py`)."""

from __future__ import annotations

import math
import re


def markdown_table(header: list[str], rows: list[list[str]], align: list[str] | None = None) -> str:
    """A markdown table, one line per row, ending in a newline; `align` holds `l` or `r` per
    column (default: the first column left, the others right)."""
    align = align or ["l"] + ["r"] * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def fmt(x: float | None, digits: int = 2) -> str:
    """`1,234.57`; `n/a` for None or nan."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def fmt_steps(steps: int) -> str:
    return f"{steps:,}"


def plural(n: int | None, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def natural(name: str) -> list:
    """A sort key that puts numbers in a name in numeric order: a tuner's `s-trial2` before
    `s-trial10`, a variant's `learning_rate=0.00025` before `learning_rate=0.001`."""
    return [
        (0, float(part), "") if re.fullmatch(r"\d+(\.\d+)?", part) else (1, 0, part)
        for part in re.split(r"(\d+(?:\.\d+)?)", name)
    ]
