"""`python -m cleanrl_utils.tuner.probe SCRIPT ENV_ID...`: what the tuner learns of a training
script before any trial, in one process of the script's interpreter, so that its imports (torch,
EnvPool) load once. It imports the script (not as `__main__`: nothing runs) and asks it: the flags
of its `Args` dataclass, as tyro spells them (`args_flags`), and, for each env id, what the
script's own env id check says of it (the `check_*_id` of `cleanrl_utils.checks.env_ids` that
the script imports, through its problem function, `ENV_ID_PROBLEMS` there). Prints one line
`MARK{"flags": [...], "env_problems": [...]}`, or `MARK{"error": ...}` when the script has no
`Args` dataclass (see `space.probe_script`, which runs it)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys

from cleanrl_utils.checks import env_ids as env_id_checks

MARK = "@@cleanrl-tuner-probe@@"


def load(script: str):
    """The script as a module, imported under a name of its own (its `__main__` block not run)."""
    spec = importlib.util.spec_from_file_location("_tuned_script", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def args_flags(cls) -> list[str]:
    """The flags tyro makes of the dataclass `cls` (without the dashes): `learning_rate` ->
    `learning-rate`, a boolean's `no-` form too (`--no-cuda`); not the fields the script sets
    itself (`init=False`: `batch_size`), which tyro leaves out."""
    flags = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        name = field.name.replace("_", "-")
        flags.append(name)
        if field.type in (bool, "bool"):  # (a string with `from __future__ import annotations`)
            flags.append(f"no-{name}")
    return flags


def env_problems(module, env_ids: list[str]) -> list[str]:
    """What the script's env id check says of the ids it would refuse (its `error:` lines,
    without `error: `)."""
    imported = set(map(id, vars(module).values()))
    asked = [
        problem for check, problem in env_id_checks.ENV_ID_PROBLEMS.items() if id(check) in imported
    ]
    return [p for env_id in env_ids for ask in asked if (p := ask(env_id)) is not None]


def probe(script: str, env_ids: list[str]) -> dict:
    module = load(script)
    cls = getattr(module, "Args", None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return {"error": "it defines no `Args` dataclass (the flags the tuner checks against)"}
    return {"flags": args_flags(cls), "env_problems": env_problems(module, env_ids)}


if __name__ == "__main__":
    print(MARK + json.dumps(probe(sys.argv[1], sys.argv[2:])))
