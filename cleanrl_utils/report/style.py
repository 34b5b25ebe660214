"""How a report names and draws its methods, the same in every table and figure: one colour per
method, taken from its label (not from its place in a list), so that a method keeps its colour in
every figure of a report and from one report to the next; the figure formats; and how a run's
score is said (`the mean of its last N games`, with the N the runs really had)."""

from __future__ import annotations

import zlib
from pathlib import Path

# matplotlib's tab10, written out: the colours do not depend on matplotlib's settings
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
FIGURE_FORMATS = ("png", "pdf", "svg")


def preferred_color(label: str) -> int:
    """The palette index a label asks for: a hash of its text, so the same in every report."""
    return zlib.crc32(label.encode()) % len(PALETTE)


def colors_of(labels) -> dict[str, str]:
    """{label: colour}: each label its own colour where the palette allows. A label whose colour
    another has already taken (labels in name order) takes the next free one: two methods of a
    report never share a colour, and a method keeps its colour across reports unless another
    method of the same report asks for it."""
    colors: dict[str, str] = {}
    for label in sorted(set(labels)):
        start = preferred_color(label)
        free = [
            PALETTE[(start + k) % len(PALETTE)]
            for k in range(len(PALETTE))
            if PALETTE[(start + k) % len(PALETTE)] not in colors.values()
        ]
        colors[label] = free[0] if free else PALETTE[start]
    return colors


def save_figure(fig, out: Path, stem: str, formats: list[str], dpi: int) -> str:
    """`fig` written as `{stem}.{format}` for each format; returns the file name of the first
    (the one the markdown shows)."""
    import matplotlib

    out.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        # (no creation date in a PDF or SVG: the same runs give the same files)
        metadata = (
            {"CreationDate": None} if fmt == "pdf" else {"Date": None} if fmt == "svg" else None
        )
        # an SVG's text stays text (`svg.fonttype none`): a paper's editor can change it
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "cleanrl"}):
            fig.savefig(out / f"{stem}.{fmt}", dpi=dpi, metadata=metadata)
    return f"{stem}.{formats[0]}"


def games_counted(runs, last_n: int) -> tuple[int, int] | None:
    """(fewest, most) games that make a run's score (its last `last_n`, or all it has when
    fewer), over the runs with a game; None when none has one."""
    counts = [min(len(run.returns), last_n) for run in runs if len(run.returns)]
    return (min(counts), max(counts)) if counts else None


def score_text(runs, last_n: int) -> str:
    """What a run's score is, as it is: `the mean of its last 100 games`; with runs that had
    fewer, the numbers they had (`the mean of its last 4 to 11 games (all its games: fewer than
    --last-n 100)`)."""
    counted = games_counted(runs, last_n)
    if counted is None or counted == (last_n, last_n):
        return f"the mean of its last {last_n} games"
    low, high = counted
    games = f"{low} games" if low == high else f"{low} to {high} games"
    if high < last_n:
        return f"the mean of its last {games} (all its games: fewer than `--last-n` {last_n})"
    return f"the mean of its last {games} (all its games when it has fewer than {last_n})"
