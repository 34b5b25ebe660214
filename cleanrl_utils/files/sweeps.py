"""A sweep: the runs one launcher command (`python -m cleanrl_utils.benchmark`) or one tuner's
study starts, and what ties each run to it.

- **Its id** (`sweep_id`): a short name such as `ppo_atari_envpool-3f9a2c1b`, derived from what
  defines the sweep (the launcher's command, env ids and seeds; the study's name), so that the
  same command given again names the same sweep. The launcher passes it to its runs in
  `CLEANRL_SWEEP`, the tuner in its trial's `CLEANRL_TUNER`; each run records it in config.json
  as `"sweep"` (`current_sweep`), and `python -m cleanrl_utils.report runs --sweep ID` reads
  exactly those runs (`report_command`).
- **Its launcher** (`launcher_gone`): a run started by a local pool (the launcher's, the
  tuner's) is told the pool's process in `CLEANRL_LAUNCHER` (its PID and start time, so that a
  PID reused since is not taken for it). A pool killed outright (`kill -9`, the OOM killer) can
  stop nothing: each of its runs finds it gone at the end of an iteration and stops as on
  SIGTERM, with a checkpoint, instead of training on with no one to report it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from pathlib import Path

SWEEP_VARIABLE = "CLEANRL_SWEEP"  # the launcher's sweep id, in each of its runs' environment
LAUNCHER_VARIABLE = "CLEANRL_LAUNCHER"  # `PID:START`: the pool process that started the run
TUNER_VARIABLE = "CLEANRL_TUNER"  # set by `cleanrl_utils.tuner`: the study and trial of a run
SWEEP_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,79}")
REPORT = "python -m cleanrl_utils.report"


def sweep_problem(sweep: str) -> str | None:
    """Why `sweep` cannot be a sweep id, or None."""
    if SWEEP_ID.fullmatch(sweep):
        return None
    return f"--sweep {sweep!r}: 1 to 80 letters, digits, '.', '_' and '-', not starting with '.'"


def sweep_id(name: str, definition) -> str:
    """The id of the sweep that `definition` (any JSON value) defines: `name` spelled with the
    characters an id allows (at most 40), `-`, and 8 hex digits of the definition's SHA-256."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:40] or "sweep"
    text = json.dumps(definition, sort_keys=True)
    return f"{readable}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def launcher_sweep_id(command: str, env_ids, seeds) -> str:
    """The launcher's sweep: its command (as the shell splits it: spacing does not count), its
    env ids (in any order) and seeds, named after the script the command runs."""
    words = shlex.split(command)
    script = next((Path(w).stem for w in words if w.endswith(".py")), None)
    definition = {"command": words, "env_ids": sorted(env_ids), "seeds": list(seeds)}
    return sweep_id(script or "sweep", definition)


def report_command(sweep: str, runs_dir: str = "runs") -> str:
    """The report of exactly the runs of `sweep` under `runs_dir`."""
    return f"{REPORT} {shlex.quote(str(runs_dir))} --sweep {shlex.quote(sweep)}"


def tuner_trial() -> dict | None:
    """The tuner's study and trial this run belongs to (a JSON object in CLEANRL_TUNER), None
    for a run started by hand."""
    text = os.environ.get(TUNER_VARIABLE)
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return {"unreadable": text}
    return value if isinstance(value, dict) else {"unreadable": text}


def launcher_run_sweep() -> str | None:
    """The launcher's sweep this process is a run of (CLEANRL_SWEEP), None outside one (or with
    a value that is no sweep id)."""
    sweep = os.environ.get(SWEEP_VARIABLE, "")
    return sweep if SWEEP_ID.fullmatch(sweep) else None


def current_sweep() -> str | None:
    """The sweep this run belongs to, as config.json records it: the launcher's, or the
    tuner's study's; None for a run started by hand."""
    tuner = tuner_trial() or {}
    sweep = launcher_run_sweep() or tuner.get("sweep")
    return sweep if isinstance(sweep, str) and SWEEP_ID.fullmatch(sweep) else None


def recorded_sweep(record: dict | None) -> str | None:
    """The sweep a run's config.json (`record`) names, None when it names none."""
    sweep = (record or {}).get("sweep")
    return sweep if isinstance(sweep, str) else None


# ---------------------------------------------------------------------------------------------
# The launcher's process, as its runs see it


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat), None when it is gone
    or a zombie (dead, not yet reaped by its parent), or when there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # (the command name may hold spaces)
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]


def launcher_env() -> dict[str, str]:
    """What a pool gives each run it starts: this process, the run's launcher."""
    pid = os.getpid()
    return {LAUNCHER_VARIABLE: f"{pid}:{process_start(pid) or ''}"}


def launcher_gone(launcher: str | None = None) -> int | None:
    """The PID of the launcher that started this run (CLEANRL_LAUNCHER, or another run's value
    `launcher`) when it is gone, None while it lives or when no launcher started the run. Without
    /proc, a PID that no process holds is gone."""
    launcher = os.environ.get(LAUNCHER_VARIABLE, "") if launcher is None else launcher
    pid, _, start = launcher.partition(":")
    if not pid.isdigit():
        return None
    if start and Path("/proc/self/stat").exists():
        return None if process_start(int(pid)) == start else int(pid)
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return int(pid)
    except OSError:  # (another user's process: it lives)
        pass
    return None
