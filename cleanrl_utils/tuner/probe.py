"""`python -m cleanrl_utils.tuner.probe SCRIPT ENV_ID...`: what the tuner learns of a training
script before any trial, in one process of the script's interpreter, so that its imports (torch,
EnvPool) load once: the script's own env id check (the `check_*_id` of `cleanrl_utils.checks`
that the script calls before building anything) on each env id, then the script's `--help`.
Prints the help, then a line `MARK{"help_exit": ..., "env_problems": [...]}` (see
`space.probe_script`, which runs it)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import runpy
import sys

from cleanrl_utils import checks

MARK = "@@cleanrl-tuner-probe@@"


def env_problems(script: str, env_ids: list[str]) -> list[str]:
    """The `error:` messages of the script's env id checks for the ids it would refuse."""
    spec = importlib.util.spec_from_file_location("_tuned_script", script)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` would
    spec.loader.exec_module(module)
    found = [
        fn
        for name, fn in vars(checks).items()
        if name.startswith("check_")
        and name.endswith("_id")
        and name != "check_env_id"
        and vars(module).get(name) is fn
    ]
    problems = []
    for env_id in env_ids:
        for check in found:
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    check(env_id)
            except SystemExit:
                problems.append(err.getvalue().strip().removeprefix("error: "))
    return problems


def help_exit(script: str):
    """Runs `python SCRIPT --help` in this process (its help printed); its exit code."""
    sys.argv = [script, "--help"]
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        return e.code
    return 0


if __name__ == "__main__":
    script, env_ids = sys.argv[1], sys.argv[2:]
    problems = env_problems(script, env_ids)
    code = help_exit(script)
    print("\n" + MARK + json.dumps({"help_exit": code, "env_problems": problems}))
