"""The search space and the script's flags: `--param NAME=KIND:ARGS` parsed into a `params_fn`,
the script's own flags read from its `Args` dataclass (`probe`), and a trial's parameters
written as flags."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.console.errors import RunError
from cleanrl_utils.tuner.probe import MARK

KINDS = {
    "uniform": "uniform:LOW:HIGH, a float drawn uniformly",
    "loguniform": "loguniform:LOW:HIGH, a float drawn uniformly on a log scale (LOW > 0)",
    "int": "int:LOW:HIGH, an integer from LOW to HIGH, both included",
    "logint": "logint:LOW:HIGH, an integer on a log scale (LOW > 0)",
    "categorical": "categorical:A,B,C, one of the values, passed to the script as written",
}
# set by the tuner for every run: not tunable, not allowed among the fixed flags
TUNER_FLAGS = ("env-id", "seed", "exp-name", "resume")


@dataclass(frozen=True)
class Param:
    """One dimension of the search space: the script's flag (`learning-rate`) and its range."""

    name: str
    kind: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()

    def suggest(self, trial):
        if self.kind == "categorical":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind in ("int", "logint"):
            return trial.suggest_int(
                self.name, int(self.low), int(self.high), log=self.kind == "logint"
            )
        return trial.suggest_float(self.name, self.low, self.high, log=self.kind == "loguniform")


def parse_param(text: str) -> Param:
    """`learning-rate=loguniform:1e-5:1e-3` -> Param. Raises `RunError` saying what is wrong."""
    name, sep, spec = text.partition("=")
    name = name.strip().removeprefix("--")
    kind, _, rest = spec.partition(":")
    if not sep or not name or kind not in KINDS:
        raise RunError(
            f"--param {text!r}: expected NAME=KIND:ARGS with KIND one of {', '.join(KINDS)} "
            "(e.g. learning-rate=loguniform:1e-5:1e-3, num-minibatches=categorical:2,4,8)"
        )
    if kind == "categorical":
        choices = tuple(c.strip() for c in rest.split(",") if c.strip())
        if not choices:
            raise RunError(f"--param {text!r}: the categorical range is empty (no values)")
        if len(set(choices)) < len(choices):
            raise RunError(f"--param {text!r}: a categorical value is repeated")
        return Param(name, kind, choices=choices)
    bounds = rest.split(":")
    try:
        if len(bounds) != 2:
            raise ValueError
        low, high = (int(b) if kind in ("int", "logint") else float(b) for b in bounds)
    except ValueError:
        number = "integers" if kind in ("int", "logint") else "numbers"
        raise RunError(f"--param {text!r}: expected {KINDS[kind]} (two {number})") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RunError(f"--param {text!r}: the bounds must be finite")
    if low > high:
        raise RunError(f"--param {text!r}: the range is empty (low {low} > high {high})")
    if kind in ("loguniform", "logint") and low <= 0:
        raise RunError(f"--param {text!r}: a log scale needs low > 0, got {low}")
    return Param(name, kind, float(low), float(high))


def parse_space(texts: list[str]) -> list[Param]:
    params = [parse_param(t) for t in texts]
    names = [p.name.replace("_", "-") for p in params]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise RunError(f"--param {', '.join(repeated)} given more than once")
    return params


def space_params_fn(params: list[Param]) -> Callable:
    """A CleanRL-style `params_fn(trial) -> {flag: value}` sampling `params`."""

    def params_fn(trial) -> dict:
        return {p.name: p.suggest(trial) for p in params}

    return params_fn


def probe_script(python: str, script: str, env_ids: list[str], timeout_s: float = 300.0):
    """The flags of the script's `Args` (without the dashes, as tyro spells them), and the env
    ids the script would refuse with their `error:` messages, from one process of `python`
    running `cleanrl_utils.tuner.probe`, which imports the script. Raises `RunError` when the
    script cannot be read (no such file, an import error, no `Args` dataclass)."""
    if not Path(script).is_file():
        raise RunError(f"no such script: {script}")
    try:
        out = subprocess.run(
            [python, "-m", "cleanrl_utils.tuner.probe", script, *env_ids],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise RunError(f"cannot read the flags of {script}: {e}") from None
    _, _, tail = out.stdout.rpartition(MARK)
    try:
        result = json.loads(tail.strip().splitlines()[0])
    except (ValueError, IndexError):
        result = None
    if out.returncode != 0 or result is None:
        last = (out.stderr.strip() or out.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        raise RunError(f"cannot read the flags of {script} (importing it failed): {last[0]}")
    if "error" in result:
        raise RunError(f"cannot read the flags of {script}: {result['error']}")
    return set(result["flags"]), result["env_problems"]


def flag_name(key: str) -> str:
    """`learning_rate`, `learning-rate`, `--learning-rate` -> `learning-rate` (tyro's spelling)."""
    return key.strip().removeprefix("--").replace("_", "-")


def check_flags(keys, known: set[str], script: str, what: str) -> None:
    """Every key must be a flag of the script and not one the tuner sets itself."""
    for key in keys:
        name = flag_name(key)
        if name in TUNER_FLAGS:
            raise RunError(f"{what} --{name}: the tuner sets it for every run")
        if name not in known:
            close = sorted(k for k in known if k.replace("-", "") == name.replace("-", ""))
            hint = f"; did you mean --{close[0]}?" if close else ""
            raise RunError(f"{what} --{name} is not a flag of {script} (see its --help){hint}")


def as_flags(params: Mapping, known: set[str] | None = None) -> list[str]:
    """A trial's parameters as command-line flags: `--name=value`; a boolean (or `True`/`False`)
    of a flag that has a `--no-` form becomes `--name` or `--no-name` (tyro's booleans)."""
    flags = []
    for key, value in params.items():
        name = flag_name(key)
        text = str(value)
        if text in ("True", "False") and (known is None or f"no-{name}" in known):
            flags.append(f"--{name}" if text == "True" else f"--no-{name}")
        else:
            flags.append(f"--{name}={text}")
    return flags


def fixed_flag_names(args: list[str]) -> list[str]:
    """The flags named in a list of fixed script arguments (`--num-envs 2` -> `num-envs`)."""
    return [a[2:].split("=", 1)[0] for a in args if a.startswith("--") and len(a) > 2]
