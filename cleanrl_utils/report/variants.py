"""What a run is a run of: its exp name and the arguments that define its experiment
(`cleanrl_utils.files.config.experiment_args`). Runs of one exp name whose experiment arguments differ
are variants, each with a column and label of its own (`ppo_atari_envpool (learning_rate=0.001)`),
never seeds of one; `--label EXP=TEXT` renames an exp name or a variant in every output."""

from __future__ import annotations

import json
from collections import defaultdict

from cleanrl_utils.files.config import experiment_args
from cleanrl_utils.report.loading import RunLog
from cleanrl_utils.report.tables import natural, plural

NOT_RECORDED = "arguments not recorded"


def experiment_key(run: RunLog) -> dict | None:
    """The experiment arguments of a run, None when its config.json records no arguments."""
    args = (run.config or {}).get("args")
    return experiment_args(args) if isinstance(args, dict) else None


def frozen(values: dict | None, keys: list[str]) -> str | None:
    """`values` restricted to `keys`, as text that compares equal exactly when they are equal."""
    if values is None:
        return None
    return json.dumps({k: values.get(k) for k in keys}, sort_keys=True, default=str)


def value_text(value) -> str:
    """An argument's value in a label: `0.001`, `True`, `Breakout`, `[1, 2]`."""
    return value if isinstance(value, str) else json.dumps(value) if value is not None else "None"


def name_variants(runs: list[RunLog], include_unfinished: bool) -> list[str]:
    """Gives each run its variant (`run.script`: its exp name alone when every reported run of
    that exp name has the same experiment arguments, else the exp name and the arguments that
    differ) and returns the notes that say so. The variants are told apart by the runs that can
    be reported (readable, and finished unless `include_unfinished`); a run left out that differs
    from all of them is named by what differs too, for the list of runs."""
    notes = []
    by_exp: dict[str, list[RunLog]] = defaultdict(list)
    for run in runs:
        if run.exp_name is not None:
            by_exp[run.exp_name].append(run)
    for exp, members in sorted(by_exp.items()):
        counted = [r for r in members if r.usable and (r.finished or include_unfinished)]
        experiments = {id(r): experiment_key(r) for r in members}
        recorded = [experiments[id(r)] for r in counted if experiments[id(r)] is not None]
        common = sorted(set.intersection(*(set(e) for e in recorded))) if recorded else []
        partial = sorted(set().union(*(set(e) for e in recorded)) - set(common))
        groups: dict[str | None, list[RunLog]] = defaultdict(list)
        for run in counted:
            groups[frozen(experiments[id(run)], common)].append(run)
        differ = [
            key
            for key in common
            if len({frozen(experiments[id(r)], [key]) for r in counted if experiments[id(r)]}) > 1
        ]
        if len(groups) <= 1:
            label = {key: exp for key in groups}
        else:
            label = {key: variant_label(exp, key, differ) for key in groups}
        for run in members:
            key = frozen(experiments[id(run)], common)
            if key in label:
                run.script = label[key]
            else:  # left out of the tables: named by what differs from those reported
                mine = experiments[id(run)] or {}
                own = sorted(
                    {k for e in recorded for k in set(e) | set(mine) if mine.get(k) != e.get(k)}
                )
                shown = ", ".join(f"{k}={value_text(mine.get(k))}" for k in own)
                run.script = f"{exp} ({shown})" if mine and own else exp
        if len(groups) > 1:
            listed = ", ".join(
                f"`{label[key]}` ({plural(len(groups[key]), 'run')})"
                for key in sorted(groups, key=lambda k: natural(label[k]))
            )
            notes.append(
                f"`{exp}`: its runs were made with different arguments, so they are "
                f"{len(groups)} variants, each reported on its own and never as seeds of one: "
                f"{listed} (compared: every argument but the seed, the env id, the protocol's "
                "settings and the bookkeeping ones; docs/report.md)"
            )
        if partial:
            notes.append(
                f"`{exp}`: arguments recorded by some of its runs only, not compared: "
                + ", ".join(partial)
                + " (runs of different versions of the script?)"
            )
    return notes


def variant_label(exp: str, key: str | None, differ: list[str]) -> str:
    """`exp (k=v, ...)` with the values of the arguments in `differ` that `key` holds."""
    if key is None:
        return f"{exp} ({NOT_RECORDED})"
    if not differ:  # (the one variant with arguments, beside runs without)
        return exp
    values = json.loads(key)
    return f"{exp} ({', '.join(f'{k}={value_text(values.get(k))}' for k in differ)})"


def parse_labels(given: tuple[str, ...], runs: list[RunLog]) -> dict[str, str] | str:
    """`--label NAME=TEXT` flags as {exp name or variant: TEXT}; the problem in one line when a
    flag names neither an exp name nor a variant of the runs (a variant's name holds `=`: the
    NAME is the longest part before an `=` that is one)."""
    known = {r.exp_name for r in runs if r.exp_name} | {r.script for r in runs if r.script}
    labels: dict[str, str] = {}
    for flag in given:
        cuts = [i for i, char in enumerate(flag) if char == "="]
        name = next((flag[:i] for i in reversed(cuts) if flag[:i] in known), None)
        if name is None:
            if not cuts:
                return f"--label {flag}: not NAME=TEXT"
            listed = ", ".join(f"`{k}`" for k in sorted(known)) or "none"
            return (
                f"--label {flag}: `{flag[: cuts[0]]}` is no exp name or variant of the runs "
                f"reported (they are: {listed})"
            )
        text = flag[len(name) + 1 :].strip()
        if not text:
            return f"--label {flag}: the text after `=` is empty"
        labels[name] = text
    return labels


def apply_labels(runs: list[RunLog], labels: dict[str, str]) -> None:
    """Each run's column named by `--label`: a variant's own label first, else its exp name's
    (which keeps what tells the variant apart: `PPO (learning_rate=0.001)`)."""
    for run in runs:
        if run.script is None:
            continue
        if run.script in labels:
            run.script = labels[run.script]
        elif run.exp_name in labels:
            run.script = labels[run.exp_name] + run.script[len(run.exp_name) :]
