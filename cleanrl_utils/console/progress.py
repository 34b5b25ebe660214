"""Training progress: a bar on a terminal, a plain line now and then in a log file."""

from __future__ import annotations

import shutil
import time

from cleanrl_utils.console import output

MIN_BAR_COLUMNS = 40  # narrower terminals (or ones that report 0 columns) get plain lines


class Progress:
    """Shows steps, steps per second, the latest average return and the time left.

    On a terminal this is a tqdm bar, drawn at the terminal's width when it starts; when stderr
    is not a terminal (SLURM, CI, `| tee`), or one too narrow for a bar, it prints one plain line
    at most every `every_s` seconds, and always the last one. `write` prints a message on a line
    of its own, never glued to the bar. Every write goes through an `output.SafeStream`: a
    terminal or a pipe that is gone (a closed ssh session, a `| tee` ended by Ctrl-C) drops the
    progress, never the run.
    """

    def __init__(self, total_steps: int, every_s: float = 10.0, stream=None, start_step: int = 0):
        self.total_steps = total_steps
        self.every_s = every_s
        self.stream = output.stream("stderr") if stream is None else output.safe(stream, "progress")
        self.start = time.time()
        self.last_print = -float("inf")
        self.bar = None
        columns = shutil.get_terminal_size((0, 0)).columns
        if self.stream.isatty() and columns >= MIN_BAR_COLUMNS:
            from tqdm import tqdm

            # one column short of the width: a line that fills it leaves the cursor waiting to
            # wrap, and some terminals then draw the next redraw on a line below
            self.bar = tqdm(
                total=total_steps,
                initial=start_step,
                unit="step",
                file=self.stream,
                ncols=columns - 1,
            )

    def update(self, global_step: int, sps: float, avg_return: float | None) -> None:
        avg = "n/a" if avg_return is None else f"{avg_return:.2f}"
        if self.bar is not None:
            self.bar.n = min(global_step, self.total_steps)
            self.bar.set_postfix_str(f"SPS={sps:.0f} avg_return={avg}", refresh=False)
            self.bar.refresh()
            return
        now = time.time()
        if now - self.last_print < self.every_s and global_step < self.total_steps:
            return
        self.last_print = now
        eta = (self.total_steps - global_step) / sps if sps > 0 else float("nan")
        self._line(
            f"step {global_step}/{self.total_steps} ({100 * global_step / self.total_steps:.1f}%)"
            f" SPS={sps:.0f} avg_return={avg} elapsed={format_seconds(now - self.start)}"
            f" eta={format_seconds(eta)}"
        )

    def write(self, message: str) -> None:
        """A message on its own line: the bar (if any) is cleared, then drawn again below it."""
        if self.bar is not None:
            self.bar.clear()
        self._line(message)
        if self.bar is not None:
            self.bar.refresh()

    def _line(self, text: str) -> None:
        self.stream.write(f"{text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def format_seconds(seconds: float) -> str:
    """`12.3s` under a minute, else `h:mm:ss`; `?` for nan (no speed measured yet)."""
    if seconds != seconds:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
