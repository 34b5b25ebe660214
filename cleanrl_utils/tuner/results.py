"""A study's results: a table of every trial (markdown and CSV), a plot of the objective against
the trial number (with the `report` extra), and the best trial's flags as a ready command."""

from __future__ import annotations

import csv
import importlib.util
import io
import shlex

from optuna.trial import TrialState

from cleanrl_utils.files.atomic import atomic_write_bytes
from cleanrl_utils.files.sweeps import report_command
from cleanrl_utils.report.tables import markdown_table
from cleanrl_utils.tuner.scores import ESTIMATES, aggregation_words
from cleanrl_utils.tuner.state import Settings, TrialRecord

HEADER = ["trial", "state", "objective", "flags", "runs", "note"]


def state_of(trial) -> str:
    if TrialRecord.of(trial).interrupted:
        return "INTERRUPTED"  # (Optuna: FAIL) resumed by a later trial with the same flags
    return trial.state.name


def objective_of(trial) -> float | None:
    """A complete trial's value; a pruned one's last intermediate value."""
    if trial.state == TrialState.COMPLETE:
        return trial.value
    if trial.state == TrialState.PRUNED and trial.intermediate_values:
        return trial.intermediate_values[max(trial.intermediate_values)]
    return None


def note_of(trial) -> str:
    record = TrialRecord.of(trial)
    notes = []
    if record.resumes is not None:
        resumed = [r for r in record.resume_runs if r.dir and r.state != "done"]
        notes.append(f"resumes trial {record.resumes}")
        if resumed:
            notes.append(
                f"{len(resumed)} run{'s' if len(resumed) > 1 else ''} continued from a checkpoint "
                "on other games (a seed derived from --seed): not the score of an uninterrupted run"
            )
    if record.interrupted:
        notes.append("stopped by Ctrl-C; resumed in a new trial")
    if trial.state == TrialState.PRUNED and record.pruned_at_step is not None:
        notes.append(f"pruned at step {record.pruned_at_step:,}")
    if trial.state == TrialState.FAIL and record.error is not None and not record.interrupted:
        notes.append(record.error.splitlines()[0])
    return "; ".join(notes)


def rows(study) -> list[list[str]]:
    out = []
    for trial in study.get_trials(deepcopy=False):
        value = objective_of(trial)
        record = TrialRecord.of(trial)
        out.append(
            [
                str(trial.number),
                state_of(trial),
                "" if value is None else f"{value:.6g}",
                " ".join(record.flags),
                " ".join(r.dir for r in record.runs if r.dir),
                note_of(trial),
            ]
        )
    return out


def steps_saved(study) -> tuple[int, int]:
    """(environment steps run, steps had every trial run to its end) over the complete and
    pruned trials: what pruning saved is the difference. A run's end is its last whole
    iteration (the steps a complete run ran); a run never started counts with the budget of its
    trial's other runs."""
    ran = budget = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        runs = TrialRecord.of(trial).runs
        budgets = [r.budget for r in runs if r.budget]
        if not budgets:
            continue
        ran += sum(r.steps or 0 for r in runs)
        if trial.state == TrialState.COMPLETE:  # every run ran to its end, in whole iterations
            budget += sum(r.steps or r.budget or budgets[0] for r in runs)
        else:
            budget += sum(r.budget or budgets[0] for r in runs)
    return ran, budget


def summary(study) -> str:
    counts = {}
    for trial in study.get_trials(deepcopy=False):
        counts[state_of(trial)] = counts.get(state_of(trial), 0) + 1
    text = ", ".join(f"{n} {state.lower()}" for state, n in sorted(counts.items()))
    ran, budget = steps_saved(study)
    if budget:
        text += (
            f". Environment steps: {ran:,} run of {budget:,} had every trial run to its end "
            f"(pruning saved {budget - ran:,}, {(budget - ran) / budget:.0%})"
        )
    return f"Trials: {text}.\n"


def write_all(settings: Settings, study) -> None:
    """trials.md, trials.csv and (with matplotlib) trials.png under the study's log folder."""
    table = rows(study)
    folder = settings.log_dir
    md = [[c.replace("|", "\\|") for c in row] for row in table]
    text = f"# Study {settings.study_name}\n\n{summary(study)}\n" + markdown_table(
        HEADER, md, ["r", "l", "r", "l", "l", "l"]
    )
    atomic_write_bytes(folder / "trials.md", text.encode())
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(HEADER)
    writer.writerows(table)
    atomic_write_bytes(folder / "trials.csv", buffer.getvalue().encode())
    if importlib.util.find_spec("matplotlib") is not None:
        plot(study, settings, folder / "trials.png")


def objective_label(settings: Settings) -> str:
    """What the objective is, in words: `average over games of human-normalised
    charts/episodic_return (last 50 values, mean over seeds)`."""
    s = settings
    estimate = s.aggregation_type in ESTIMATES
    over = f"{aggregation_words(s.aggregation_type)} of " if len(s.env_ids) > 1 or estimate else ""
    scale = "" if s.normalizer.scale == "raw" else f"{s.normalizer.scale} "
    return (
        f"{over}{scale}{s.metric}\n(last {s.metric_last_n_average_window} values, mean over seeds)"
    )


def figure(study, settings: Settings):
    """The objective of each complete trial, the last value of each pruned one, each
    interrupted one (its last value, if it reported one, and a dotted line: resumed as a new
    trial), and the best so far."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    trials = study.get_trials(deepcopy=False)
    interrupted = [t for t in trials if TrialRecord.of(t).interrupted]
    for number in [t.number for t in interrupted]:
        ax.axvline(number, color="grey", linestyle=":", linewidth=1)
    if interrupted:
        ax.plot([], [], color="grey", linestyle=":", label="interrupted (resumed as a new trial)")
    for state, style in ((TrialState.COMPLETE, "o"), (TrialState.PRUNED, "x")):
        points = [(t.number, objective_of(t)) for t in trials if t.state == state]
        points = [(n, v) for n, v in points if v is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=state.name.lower())
    last = [
        (t.number, t.intermediate_values[max(t.intermediate_values)])
        for t in interrupted
        if t.intermediate_values
    ]
    if last:
        ax.plot(*zip(*last, strict=True), "s", color="grey", label="interrupted: last value")
    complete = [(t.number, t.value) for t in trials if t.state == TrialState.COMPLETE]
    if complete:
        best, xs, ys = None, [], []
        better = max if settings.direction == "maximize" else min
        for number, value in complete:
            best = value if best is None else better(best, value)
            xs.append(number)
            ys.append(best)
        ax.step(xs, ys, where="post", label="best so far")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials are numbered 0, 1, 2, ...
    ax.set_xlabel("trial")
    ax.set_ylabel(objective_label(settings), fontsize=8)
    ax.set_title(f"study {settings.study_name}: objective, {settings.direction}d")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot(study, settings: Settings, path) -> None:
    import matplotlib.pyplot as plt

    fig = figure(study, settings)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())


def print_best(settings: Settings, study):
    """Prints the best trial and its flags as ready commands; returns it (None if none)."""
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    s = settings
    print(f"======= results: {s.log_dir / 'trials.md'} (and .csv, .png)")
    print(summary(study), end="")
    if not complete:
        print("no trial completed")
        print(f"report of the study's runs: {report_command(s.sweep, str(s.runs_dir))}")
        return None
    best = study.best_trial
    flags = [*s.script_args, *TrialRecord.of(best).flags]
    command = shlex.join(["python", s.script, *flags])
    print(f"best trial: {best.number}, objective {best.value:.6g}")
    print(f"  one run:   {command} --env-id {shlex.quote(s.env_ids[0])} --seed 1")
    env_ids = " ".join(shlex.quote(e) for e in s.env_ids)
    if s.aggregation_type == "atari3-val":  # tuned on Atari-3-Val: reported on Atari-5
        env_ids = "atari5"
    print(
        f"  benchmark: python -m cleanrl_utils.benchmark --env-ids {env_ids} --num-seeds 3 "
        f"--workers 1 --command {shlex.quote(command)}",
    )
    print(f"report of the study's runs: {report_command(s.sweep, str(s.runs_dir))}", flush=True)
    return best
