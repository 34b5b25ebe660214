"""The Optuna tuner (`cleanrl_utils.tuner`) with real processes of `cleanrl/ppo_atari_envpool.py`:
studies of tiny runs on one machine, two tuners sharing one storage, pruning inside a run with
the pruned run's checkpoint on disk, and bad input; with real runs of `tests/sweep_run.py`
(the scripts' lifecycle around iterations that only log): Ctrl-C, a killed tuner and a rerun
that resumes, and a SLURM array of tuners."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from scripts_testing import (
    PPO_ATARI_ENVPOOL,
    REPO_ROOT,
    describe,
    finish_script,
    run_script,
    start_script,
)

optuna = pytest.importorskip("optuna")

from cleanrl_utils.console.errors import RunError, entry_point  # noqa: E402
from cleanrl_utils.files.state_file import list_checkpoints  # noqa: E402
from cleanrl_utils.tuner.scores import metric_values  # noqa: E402

# The tests of the processes that `started` starts once share one xdist worker. (Not the module's
# `pytestmark`: xdist joins a test's groups, and the SLURM test below must be in test_slurm's alone.)
STARTED = pytest.mark.xdist_group(__name__)

# runs of a few seconds: 2 envs x 16 steps per iteration, games cut after 8 steps so that every
# iteration ends some (the default metric, charts/episodic_return, then has values)
TINY = "--num-envs 2 --num-steps 16 --num-minibatches 1 --update-epochs 1 --max-episode-steps 8 --checkpoint-every 0"


SWEEP_RUN = REPO_ROOT / "tests" / "sweep_run.py"  # a real run whose iterations only log


def tuner_command(storage: str, study: str, *extra: str, script: Path = PPO_ATARI_ENVPOOL):
    return [
        "--script",
        str(script),
        "--env-ids",
        "Breakout-v5",
        "--param",
        "learning-rate=loguniform:1e-4:1e-3",
        "--param",
        "ent-coef=uniform:0:0.02",
        "--storage",
        storage,
        "--study-name",
        study,
        "--metric-last-n-average-window",
        "4",
        "--pruner",
        "none",
        *extra,
    ]


def load_study(cwd: Path, storage: str, study: str):
    from cleanrl_utils.tuner.storage import open_storage

    if storage.startswith("sqlite:///"):
        storage = f"sqlite:///{cwd / storage.removeprefix('sqlite:///')}"
    else:
        storage = str(cwd / storage)
    return optuna.load_study(study_name=study, storage=open_storage(storage))


def run_configs(cwd: Path) -> dict[str, dict]:
    return {p.name: json.loads((p / "config.json").read_text()) for p in (cwd / "runs").iterdir()}


# ---------------------------------------------------------------------------------------------
# Two tuners, one journal storage: every trial complete, none run twice, the table written


def shared_study_commands() -> list[list[str]]:
    """Two tuners of a 3-trial study, with 2 and 1 workers: started together, they fill their 3
    workers at about the same moment, so that each asks the shared storage for a trial while the
    other does (the race in which a trial could run twice), and each gets at least one (the first
    trial to end, a run's whole start-up later, finds the study's 3 trials taken)."""
    args = tuner_command(
        "study.log", "shared", "--script-args=--total-timesteps 64 " + TINY, "--num-trials", "3"
    )
    return [[*args, "--workers", "2"], [*args, "--workers", "1"]]


def prune_tuner_file(cwd: Path, budget: int) -> Path:
    tiny = TINY.replace("--", "").split()
    flags = ", ".join(f'"{k}": {v!r}' for k, v in zip(tiny[::2], tiny[1::2], strict=True))
    path = cwd / "tune_prune.py"
    path.write_text(TUNER_FILE.format(script=str(PPO_ATARI_ENVPOOL), tiny=flags, budget=budget))
    return path


PRUNE_BUDGET = 4096  # 128 iterations; pruned at the first mark (budget / 32)
# the bad input that only the script's `--help` (a process importing torch and EnvPool) reveals
SLOW_BAD_INPUT = {
    "unknown flag": (["--param", "learning-rat=uniform:0:1"], "--learning-rat is not a flag of"),
    "unknown game": (["--env-ids", "Breakot-v5"], "unknown env id 'Breakot-v5'"),
}


def bad_input_command(extra: list[str]) -> list[str]:
    return ["--script", str(PPO_ATARI_ENVPOOL), "--param", "ent-coef=uniform:0:0.02", *extra]


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The independent tuner processes of the slow tests, started at once (each in its own
    folder) so that one's start-up and waits overlap the others' work: the two tuners sharing a
    study, the pruning study, the bad input read from the script's `--help`."""
    procs = {}
    cwd = tmp_path_factory.mktemp("shared")
    for i, command in enumerate(shared_study_commands()):
        procs[f"shared{i}"] = cwd, start_script(command, cwd, module="cleanrl_utils.tuner")
    cwd = tmp_path_factory.mktemp("prune")
    procs["prune"] = cwd, start_script([], cwd, script=prune_tuner_file(cwd, PRUNE_BUDGET))
    for name, (extra, _) in SLOW_BAD_INPUT.items():
        cwd = tmp_path_factory.mktemp("bad")
        procs[name] = cwd, start_script(bad_input_command(extra), cwd, module="cleanrl_utils.tuner")
    finished = {}

    def finish(name: str):
        if name not in finished:
            cwd, proc = procs[name]
            finished[name] = cwd, finish_script(proc, timeout=600)
        return finished[name]

    yield finish
    for name in procs:  # (a test that failed early leaves none running)
        finish(name)


@pytest.fixture(scope="module")
def shared_study(started):
    (cwd, first), (_, second) = started("shared0"), started("shared1")
    return cwd, [first, second]


@pytest.mark.slow
@STARTED
def test_two_tuners_share_a_study_and_complete_every_trial_once(shared_study):
    cwd, procs = shared_study
    for proc in procs:
        assert proc.returncode == 0, describe(proc)
    study = load_study(cwd, "study.log", "shared")
    trials = study.get_trials()
    assert len(trials) >= 3  # (two tuners asking at the same moment may add one more)
    assert all(t.state.name == "COMPLETE" for t in trials), [t.state for t in trials]
    # both tuners ran trials, each trial its own run, tagged with its study and trial
    assert len({t.user_attrs["worker"]["pid"] for t in trials}) == 2
    configs = run_configs(cwd)
    tags = sorted(c["tuner"]["trial"] for c in configs.values())
    assert tags == sorted(t.number for t in trials), "a trial ran twice, or a run is missing"
    assert {c["tuner"]["study"] for c in configs.values()} == {"shared"}
    (sweep,) = {c["sweep"] for c in configs.values()}  # the study is one sweep, either tuner's
    report = f"report of the study's runs: python -m cleanrl_utils.report runs --sweep {sweep}"
    assert all(proc.stdout.splitlines()[-1] == report for proc in procs)  # their last line
    for t in trials:
        (run,) = t.user_attrs["runs"].values()
        assert configs[Path(run["dir"]).name]["args"]["learning_rate"] == pytest.approx(
            t.params["learning-rate"]
        )


@pytest.mark.slow
@STARTED
def test_the_table_lists_every_trial_with_its_objective_flags_and_run(shared_study):
    cwd, procs = shared_study
    study = load_study(cwd, "study.log", "shared")
    folder = cwd / "tuner_logs" / "shared"
    with open(folder / "trials.csv") as f:
        rows = {int(r["trial"]): r for r in csv.DictReader(f)}
    assert set(rows) == {t.number for t in study.get_trials()}
    for t in study.get_trials():
        row = rows[t.number]
        assert row["state"] == "COMPLETE" and float(row["objective"]) == pytest.approx(t.value)
        assert f"--learning-rate={t.params['learning-rate']}" in row["flags"].split()
        assert (cwd / row["runs"] / "config.json").exists()
    markdown = (folder / "trials.md").read_text()
    assert markdown.count("| COMPLETE |") == len(rows)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (folder / "trials.png").read_bytes().startswith(b"\x89PNG")
    # the best trial's flags, printed as a command that runs
    best = study.best_trial
    out = "".join(p.stdout for p in procs)
    assert f"--learning-rate={best.params['learning-rate']}" in out.split("one run:")[-1]


@pytest.mark.slow
@STARTED
def test_the_objective_is_the_human_normalised_score_of_the_last_values(shared_study):
    cwd, _ = shared_study
    study = load_study(cwd, "study.log", "shared")
    random, human = 1.7, 30.5  # Breakout in cleanrl_utils/data/atari_human_random_scores.csv
    for t in study.get_trials():
        (run,) = t.user_attrs["runs"].values()
        values, _ = metric_values(cwd / run["dir"], "charts/episodic_return")
        assert len(values) > 4
        score = sum(v for _, v in values[-4:]) / 4
        assert t.value == pytest.approx((score - random) / (human - random))


# ---------------------------------------------------------------------------------------------
# Pruning inside a run, from a CleanRL-style tuner file


TUNER_FILE = """
import optuna
from cleanrl_utils.tuner import Tuner

BUDGET = {budget}



def params_fn(trial):
    learning_rate = trial.suggest_categorical("learning-rate", [0.0, 0.00025, -1.0])
    # the run that cannot learn gets a long budget: it must still be running when it is pruned
    total = BUDGET if learning_rate == 0 else 256
    return {{"learning-rate": learning_rate, "total-timesteps": total, {tiny}}}


tuner = Tuner(
    script={script!r},
    metric="charts/learning_rate",
    target_scores={{"Breakout-v5": None}},
    params_fn=params_fn,
    direction="maximize",
    aggregation_type="average",
    metric_last_n_average_window=1,
    sampler=optuna.samplers.GridSampler({{"learning-rate": [0.0, 0.00025, -1.0]}}, seed=0),
    pruner=optuna.pruners.ThresholdPruner(lower=1e-9),
    storage="sqlite:///prune.db",
    study_name="prune",
    normalization="none",
    workers=2,
    pruning_marks=32,
)
tuner.tune(num_trials=3, num_seeds=1)
"""


@pytest.mark.slow
@STARTED
def test_a_trial_that_cannot_learn_is_pruned_inside_its_run_and_a_crash_fails_its_trial(started):
    tmp_path, proc = started("prune")
    budget = PRUNE_BUDGET
    assert proc.returncode == 0, describe(proc)
    study = load_study(tmp_path, "sqlite:///prune.db", "prune")
    by_lr = {t.params["learning-rate"]: t for t in study.get_trials()}
    pruned, learned, crashed = by_lr[0.0], by_lr[0.00025], by_lr[-1.0]
    assert learned.state.name == "COMPLETE", describe(proc)
    assert pruned.state.name == "PRUNED", describe(proc)
    (run,) = pruned.user_attrs["runs"].values()
    run_dir = tmp_path / run["dir"]
    _, last_step = metric_values(run_dir, "charts/learning_rate")
    assert pruned.user_attrs["pruned_at_step"] <= last_step < budget  # stopped before its end
    assert list_checkpoints(run_dir), "the pruned run left no checkpoint"
    log = Path(run["log"]) if Path(run["log"]).is_absolute() else tmp_path / run["log"]
    assert "received SIGTERM" in log.read_text()
    assert "pruned at step" in proc.stdout
    # a run that fails makes its trial failed, with its log's last lines; the study goes on
    assert crashed.state.name == "FAIL"
    assert "exit code 2" in crashed.user_attrs["error"]
    assert "error: --learning-rate must not be negative" in crashed.user_attrs["error"]
    # what pruning saved, in environment steps, against running every trial to its end
    table = (tmp_path / "tuner_logs" / "prune" / "trials.md").read_text()
    assert f"{last_step + 256:,} run of {budget + 256:,} had every trial run" in table


# ---------------------------------------------------------------------------------------------
# Ctrl-C and a rerun, of tests/sweep_run.py's runs: they go through the scripts' whole lifecycle
# (`cleanrl_utils.run.Run`: checkpoints, stop signals, `--resume`, a launcher that is gone) in a
# fraction of a real run's start-up, which 6 processes here would pay (the pruning study above
# stops a real run of ppo_atari_envpool.py, which checkpoints)


@contextmanager
def suspended_runs():
    """The pids of the runs a test suspended; those still there at its end (a test that failed
    before a tuner stopped them) are killed, never left frozen on the machine."""
    pids: list[int] = []
    try:
        yield pids
    finally:
        for pid in pids:
            try:
                if str(SWEEP_RUN).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.killpg(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


def freeze_runs_as_they_train(
    cwd: Path, runs: int, event_files_each: int, proc, suspended: list[int]
) -> list[Path]:
    """Until `runs` run folders have logged an iteration in their `event_files_each`-th event file
    (2: a resumption), each run is suspended (SIGSTOP to its process group, found by the run
    folder's lock) as soon as it has: it stays mid-budget however busy the machine is, until a
    tuner stops it (the tuner's SIGTERM comes with SIGCONT). Returns the folders."""
    from cleanrl_utils.report.events import event_files, read_event_file
    from cleanrl_utils.run.folder_guard import lock_holder

    frozen: set[Path] = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the tuner ended too early\n{describe(finish_script(proc))}")
        folders = sorted((cwd / "runs").iterdir()) if (cwd / "runs").is_dir() else []
        for folder in set(folders) - frozen:
            files = event_files(folder)
            if len(files) != event_files_each or read_event_file(files[-1], ()).last_step <= 0:
                continue
            pid = lock_holder(folder.stat().st_ino)
            if pid != "unknown":
                os.killpg(int(pid), signal.SIGSTOP)
                suspended.append(int(pid))
                frozen.add(folder)
        if len(frozen) == runs == len(folders):
            return folders
        time.sleep(0.2)
    raise AssertionError(f"{runs} runs did not train in time; suspended: {sorted(frozen)}")


@pytest.mark.slow
def test_ctrl_c_and_a_killed_tuner_leave_trials_that_the_next_tuner_resumes(tmp_path):
    with suspended_runs() as suspended:
        ctrl_c_then_kill_then_resume(tmp_path, suspended)


def ctrl_c_then_kill_then_resume(tmp_path: Path, suspended: list[int]) -> None:
    # 400 iterations of 8 steps, each taking 0.1 s while the file `slow` is there: the runs are
    # suspended after their first few, however busy the machine; then the last tuner's at once
    budget = 3200
    (tmp_path / "slow").touch()
    args = tuner_command(
        "sqlite:///tuner.db",
        "ctrlc",
        f"--script-args=--total-timesteps {budget}",
        "--num-trials",
        "2",
        "--workers",
        "2",
        script=SWEEP_RUN,
    )
    # Ctrl-C: both (suspended) runs checkpoint, both trials are enqueued again
    proc = start_script(args, tmp_path, module="cleanrl_utils.tuner")
    folders = freeze_runs_as_they_train(tmp_path, 2, 1, proc, suspended)
    proc.send_signal(signal.SIGINT)
    stopped = finish_script(proc, timeout=300)
    assert stopped.returncode == 130, describe(stopped)
    assert all(list_checkpoints(f) for f in folders), describe(stopped)
    assert stopped.stdout.count("interrupted: enqueued again") == 2, describe(stopped)

    # the next tuner resumes both runs, and is killed outright: its runs are left without it
    proc = start_script(args, tmp_path, module="cleanrl_utils.tuner")
    assert freeze_runs_as_they_train(tmp_path, 2, 2, proc, suspended) == folders, (
        "a run started over"
    )
    proc.kill()
    finish_script(proc)

    # the one after stops those runs (they checkpoint), resumes them and completes the study
    (tmp_path / "slow").unlink()
    again = run_script(args, tmp_path, module="cleanrl_utils.tuner", timeout=600)
    assert again.returncode == 0, describe(again)
    assert again.stdout.count("left running by a tuner that is gone") == 2, describe(again)
    assert sorted((tmp_path / "runs").iterdir()) == folders, "a trial's run started over"
    study = load_study(tmp_path, "sqlite:///tuner.db", "ctrlc")
    states = sorted(str((t.state.name, t.user_attrs.get("interrupted"))) for t in study.trials)
    assert states == sorted(map(str, [("FAIL", True)] * 4 + [("COMPLETE", None)] * 2))
    for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        killed = study.trials[t.user_attrs["resumes"]]
        stopped_by_ctrl_c = study.trials[killed.user_attrs["resumes"]]
        assert t.params == killed.params == stopped_by_ctrl_c.params
        (run,) = t.user_attrs["runs"].values()
        config = json.loads((tmp_path / run["dir"] / "config.json").read_text())
        assert [r["tuner"]["trial"] for r in config["resumes"]] == [killed.number, t.number]
        assert all("--resume" in r["command"] for r in config["resumes"])
        assert metric_values(tmp_path / run["dir"], "charts/SPS")[1] == budget


# ---------------------------------------------------------------------------------------------
# Bad input: one `error:` line, exit code 2, nothing started


@STARTED
@pytest.mark.parametrize(
    "extra, message",
    [
        (["--param", "learning-rate=uniform:1e-3:1e-4"], "the range is empty"),
        (["--param", "num-minibatches=categorical:"], "the categorical range is empty"),
        (["--env-ids", "atari3"], "unknown game set 'atari3' (the sets: atari5, atari3-val"),
        (
            ["--env-ids", "Assault-v5", "--aggregation", "atari3-val"],
            "--aggregation atari3-val needs --env-ids with its games, missing MsPacman, "
            "YarsRevenge (e.g. --env-ids atari3-val)",
        ),
        (
            ["--storage", "sqlite:////no/such/folder/t.db"],
            "the folder /no/such/folder does not exist",
        ),
        (
            ["--storage", "journal:/no/such/folder/t.log"],
            "the journal's folder /no/such/folder does not exist",
        ),
        pytest.param(*SLOW_BAD_INPUT["unknown flag"], marks=pytest.mark.slow),
        pytest.param(*SLOW_BAD_INPUT["unknown game"], marks=pytest.mark.slow),
    ],
)
def test_bad_input_is_one_error_line_and_nothing_starts(tmp_path, request, extra, message):
    slow = [name for name, (e, _) in SLOW_BAD_INPUT.items() if e == extra]
    if slow:  # (started with the other slow tests' processes)
        tmp_path, proc = request.getfixturevalue("started")(slow[0])
    else:
        proc = run_script(bad_input_command(extra), tmp_path, module="cleanrl_utils.tuner")
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], describe(
        proc
    )
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == []


def test_help_explains_every_flag(tmp_path):
    proc = run_script(["--help"], tmp_path, module="cleanrl_utils.tuner", timeout=120)
    assert proc.returncode == 0, describe(proc)
    from cleanrl_utils.tuner.cli import Args

    source = Path(sys.modules[Args.__module__].__file__).read_text()
    for name in Args.__dataclass_fields__:
        assert f"--{name.replace('_', '-')}" in proc.stdout
        # every field is followed by its docstring, which tyro prints as the flag's help
        line = next(line for line in source.splitlines() if line.startswith(f"    {name}:"))
        following = source.splitlines()[source.splitlines().index(line) + 1]
        assert following.strip().startswith('"""'), name


# ---------------------------------------------------------------------------------------------
# A SLURM array of tuner workers on the project's test cluster (tests/slurm_cluster.py)


@pytest.mark.slow
@pytest.mark.xdist_group("test_slurm")  # (one test cluster at a time: two at once ran no job)
def test_a_slurm_array_of_tuners_completes_a_shared_study(tmp_path):
    """The tuners run tests/sweep_run.py (the array is what is tested, not the script): each of the
    3 tuners (the one that submits, the array's 2) probes the script, each trial runs it, and
    sweep_run.py's start-up costs a fraction of ppo_atari_envpool.py's (0.2 CPU-s, not 3.5, for
    a probe; 2, not 7, for a run)."""
    from slurm_cluster import SlurmCluster

    with SlurmCluster(tmp_path / "cluster", cpus=2, gpus=0) as cluster:
        cwd = tmp_path / "study"
        cwd.mkdir()
        # a run of 100 iterations, each taking 0.1 s (sleeping) while `slow` is there: the array's
        # second tuner asks for a trial before the first one's run is over, as it did when the run
        # was ppo_atari_envpool.py's, which took as long to start (each tuner runs one trial)
        (cwd / "slow").touch()
        args = tuner_command(
            "study.log", "array", "--script-args=--total-timesteps 800", "--num-trials", "2",
            script=SWEEP_RUN,
        )  # fmt: skip
        args += ["--slurm-template-path", str(REPO_ROOT / "benchmark" / "tuner_cpu.slurm_template")]
        env = {**cluster.env, "PYTHONPATH": str(REPO_ROOT)}
        submitted = run_script(args, cwd, module="cleanrl_utils.tuner", env=env, timeout=300)
        assert submitted.returncode == 0, describe(submitted)
        assert "submitted job" in submitted.stdout
        assert not (cwd / "runs").exists()  # nothing runs on the submitting machine
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            queue = subprocess.run(
                ["squeue", "--noheader"], env=cluster.env, capture_output=True, text=True
            )
            if queue.returncode == 0 and not queue.stdout.strip():
                break
            time.sleep(2)
        logs = "\n".join(p.read_text() for p in (cwd / "slurm" / "logs").glob("*.out"))
        study = load_study(cwd, "study.log", "array")
        trials = study.get_trials()
        assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"], logs
        # each array task a tuner of its own, each trial's run inside a task
        assert len({t.user_attrs["worker"]["slurm"] for t in trials}) == 2, logs
        for config in run_configs(cwd).values():
            assert config["slurm"]["array_task_id"] in ("0", "1")
            assert config["tuner"]["study"] == "array"


@pytest.mark.slow
def test_the_example_tuner_file_sets_only_flags_and_games_the_script_has(monkeypatch):
    import runpy

    from cleanrl_utils.tuner.space import check_flags, probe_script

    monkeypatch.chdir(REPO_ROOT)  # the example's paths are relative to the repository root
    tuner = runpy.run_path("benchmark/tune_ppo_atari_envpool.py")["tuner"]  # (not __main__)
    settings = tuner.settings
    flags, env_problems = probe_script(settings.python, settings.script, list(settings.env_ids))
    assert env_problems == [] and settings.env_ids == ("Breakout-v5", "Pong-v5")
    sampled = tuner.params_fn(optuna.create_study().ask())
    check_flags(list(sampled), flags, settings.script, "search space flag")  # raises if unknown
    assert {"learning-rate", "num-minibatches", "ent-coef"} <= set(sampled)


@pytest.mark.slow
def test_the_ale_vector_script_is_probed_with_either_spelling_of_its_ids():
    """A tuner of `ppo_atari_ale_vector.py`: its flags are read, ALE's ids and EnvPool's pass,
    a gymnasium id is refused (before any trial), and an ALE id is scored on its game's scale."""
    from cleanrl_utils.tuner.scores import Normalizer
    from cleanrl_utils.tuner.space import probe_script

    script = str(REPO_ROOT / "cleanrl" / "ppo_atari_ale_vector.py")
    env_ids = ["ALE/Breakout-v5", "Pong-v5", "PongNoFrameskip-v4"]
    flags, env_problems = probe_script(sys.executable, script, env_ids)
    assert {"learning-rate", "env-id", "max-episode-steps"} <= flags
    (problem,) = env_problems
    assert "'PongNoFrameskip-v4'" in problem and "ALE's vector env" in problem
    normalizer = Normalizer.make(env_ids[:1], {}, "auto")
    assert normalizer("ALE/Breakout-v5", 30.5) == pytest.approx(1.0)  # human-normalised


# ---------------------------------------------------------------------------------------------
# The objective's arithmetic, the flags, the run's record (no processes)


def test_scores_are_normalised_per_game_aggregated_over_games_then_averaged_over_seeds():
    from cleanrl_utils.tuner.scores import Normalizer, aggregate

    norm = Normalizer.make(["Breakout-v5", "Pong-v5"], {"Pong-v5": [-21, 21]}, "auto")
    assert norm("Pong-v5", 0.0) == pytest.approx(0.5)  # CleanRL's target scores
    assert norm("Breakout-v5", 30.5) == pytest.approx(1.0)  # human-normalised: human 30.5
    assert norm("Breakout-v5", 1.7) == pytest.approx(0.0)  # random 1.7
    scores = {("A", 1): 1.0, ("B", 1): 3.0, ("C", 1): 8.0, ("A", 2): 0.0, ("B", 2): 0.0}
    assert aggregate(scores, "median") == pytest.approx((3.0 + 0.0) / 2)
    assert aggregate(scores, "average") == pytest.approx((4.0 + 0.0) / 2)
    iqm = {("A", 1): 0.0, ("B", 1): 1.0, ("C", 1): 2.0, ("D", 1): 100.0}
    assert aggregate(iqm, "iqm") == pytest.approx(1.5)  # the middle half of 4 games


def test_the_atari3_val_objective_is_the_estimate_of_the_games_means_over_seeds():
    from cleanrl_utils.report import atari5
    from cleanrl_utils.tuner.scores import Normalizer, aggregate

    ids = ["Assault-v5", "MsPacman-v5", "YarsRevenge-v5", "Pong-v5"]  # Pong: not in the model
    norm = Normalizer.make(ids, None, "auto").for_estimate("atari3-val")
    assert norm("YarsRevenge-v5", 3092.91) == 0.0  # the fit's random score, not the table's 3092.9
    assert norm("Pong-v5", -20.7) == 0.0  # the other games keep the project's table
    returns = {"Assault-v5": [800.0, 1200.0], "MsPacman-v5": [900.0, 700.0]}
    returns |= {"YarsRevenge-v5": [9000.0, 5000.0], "Pong-v5": [-21.0, -19.0]}
    scores = {(e, seed): norm(e, r) for e, rs in returns.items() for seed, r in zip((1, 2), rs)}
    expected = atari5.estimate_with_interval("atari3-val", returns, reps=10)[0]
    assert aggregate(scores, "atari3-val") == pytest.approx(expected)
    # by hand: the model on each game's mean HNS (in percent), no intercept
    means = {g: (np.mean(returns[f"{g}-v5"]) - r) / (h - r) for g, (r, h) in fit_scores().items()}
    y = sum(c * np.log10(1 + 100 * means[g]) for g, c in atari5.COEFFICIENTS["atari3-val"].items())
    assert aggregate(scores, "atari3-val") == pytest.approx(10**y - 1)
    # an intermediate value (games not scored yet count as random play): a lower bound
    only_assault = {k: v for k, v in scores.items() if k[0] == "Assault-v5"}
    assert 0 < aggregate(only_assault, "atari3-val") < aggregate(scores, "atari3-val")
    assert aggregate({("Pong-v5", 1): 1.0}, "atari3-val") is None


def fit_scores() -> dict[str, tuple[float, float]]:
    from cleanrl_utils.report import atari5

    fit = atari5.load_fit_scores()
    return {g: fit[g] for g in atari5.GAME_SETS["atari3-val"]}


def test_an_estimate_objective_needs_human_normalised_games():
    from cleanrl_utils.tuner.scores import Normalizer

    ids = ["Assault-v5", "MsPacman-v5", "YarsRevenge-v5"]
    with pytest.raises(ValueError, match="human-normalises MsPacman-v5, not with target scores"):
        Normalizer.make(ids, {"MsPacman-v5": [0, 1]}, "auto").for_estimate("atari3-val")
    with pytest.raises(ValueError, match="not with --normalization none"):
        Normalizer.make(ids, None, "none").for_estimate("atari3-val")
    with pytest.raises(ValueError, match="missing BattleZone, DoubleDunk"):
        Normalizer.make(ids, None, "auto").for_estimate("atari5")


def test_games_that_cannot_share_a_scale_are_refused():
    from cleanrl_utils.tuner.scores import Normalizer

    with pytest.raises(ValueError, match="cannot be put on one scale"):
        Normalizer.make(["Breakout-v5", "CartPole-v1"], None, "auto")
    with pytest.raises(ValueError, match="no human and random scores"):
        Normalizer.make(["CartPole-v1"], None, "human")
    assert Normalizer.make(["CartPole-v1"], {"CartPole-v1": None}, "auto")("CartPole-v1", 7) == 7


@pytest.mark.parametrize("sampler", ["TPESampler", "RandomSampler"])
def test_a_seeded_sampler_continuing_a_study_does_not_draw_its_trials_again(
    sampler, tmp_path, monkeypatch
):
    import optuna

    from cleanrl_utils.tuner.study import fresh_draws

    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    storage = f"sqlite:///{tmp_path / 'study.db'}"

    def draws(n: int, task: str | None = None) -> list[float]:
        """`n` trials' draws by a tuner process that starts with --sampler-seed 1."""
        if task is not None:
            monkeypatch.setenv("SLURM_ARRAY_TASK_ID", task)
        make = getattr(optuna.samplers, sampler)
        study = optuna.create_study(
            storage=storage, study_name=f"task{task}", sampler=make(seed=1), load_if_exists=True
        )
        fresh_draws(study)
        out = []
        for _ in range(n):
            trial = study.ask()
            out.append(trial.suggest_float("learning_rate", 1e-5, 1e-2, log=True))
            study.tell(trial, 0.0)
        return out

    first, again = draws(3), draws(3)
    assert not set(first) & set(again)  # the continued study draws new parameters
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    task_0 = draws(2, "0")
    assert draws(2, "1")[0] != task_0[0]  # another array task on the new study: other draws
    optuna.delete_study(study_name="task0", storage=storage)
    assert draws(2, "0") == task_0  # a new study's first tuner: the seed's draws, as before


def test_a_trial_s_parameters_become_the_script_s_flags():
    from cleanrl_utils.tuner.space import as_flags

    known = {"learning-rate", "anneal-lr", "no-anneal-lr"}
    flags = as_flags({"learning_rate": 1e-4, "anneal-lr": False, "--num-envs": 4}, known)
    assert flags == ["--learning-rate=0.0001", "--no-anneal-lr", "--num-envs=4"]


@pytest.mark.parametrize("script", sorted(p.stem for p in (REPO_ROOT / "cleanrl").glob("ppo_*.py")))
def test_the_flags_read_from_a_script_s_args_are_the_ones_its_help_lists(script, capsys):
    """The tuner reads a script's flags from its `Args` dataclass, as tyro spells them: each
    option `--help` lists (a boolean's `--no-` form too), and nothing else (not the fields the
    script sets itself, `batch_size`)."""
    import importlib

    from cleanrl_utils.checks.args import parse_args
    from cleanrl_utils.tuner.probe import args_flags

    cls = importlib.import_module(f"cleanrl.{script}").Args
    with pytest.raises(SystemExit) as exit_:
        parse_args(cls, ["--help"])
    assert exit_.value.code in (0, None)
    helped = capsys.readouterr().out
    listed = set(re.findall(r"^[^\w-]*--(\w[\w-]*)", helped, re.M))
    listed |= set(re.findall(r", --(no-[\w-]+)", helped))
    assert set(args_flags(cls)) == listed - {"help"}
    assert "batch-size" not in listed and {"learning-rate", "cuda", "no-cuda"} <= listed


def test_the_probe_asks_the_script_and_says_why_it_cannot(tmp_path):
    """The probe imports the script (its `__main__` block does not run) and asks its `Args` and
    its env id check; a script it cannot import, or without `Args`, is one line."""
    from cleanrl_utils.tuner.space import probe_script

    script = tmp_path / "ok.py"
    script.write_text(
        FAILING_SCRIPT.replace(
            "import sys\n",
            "import sys\n\nfrom cleanrl_utils.checks.env_ids import check_envpool_atari_id\n",
        )
    )
    flags, problems = probe_script(sys.executable, str(script), ["Breakout-v5", "Breakot-v5"])
    assert flags == {"learning-rate", "env-id", "seed", "exp-name"}
    assert problems == [
        "unknown env id 'Breakot-v5' for EnvPool's Atari games; did you mean Breakout-v5, "
        "BankHeist-v5, Backgammon-v5?"
    ]
    (tmp_path / "no_args.py").write_text("import sys\n")
    with pytest.raises(RunError) as error:
        probe_script(sys.executable, str(tmp_path / "no_args.py"), [])
    assert str(error.value) == (
        f"cannot read the flags of {tmp_path / 'no_args.py'}: it defines no `Args` dataclass "
        "(the flags the tuner checks against)"
    )
    (tmp_path / "broken.py").write_text("import no_such_module_here\n")
    with pytest.raises(RunError) as error:
        probe_script(sys.executable, str(tmp_path / "broken.py"), [])
    assert str(error.value) == (
        f"cannot read the flags of {tmp_path / 'broken.py'} (importing it failed): "
        "ModuleNotFoundError: No module named 'no_such_module_here'"
    )


def test_a_run_records_its_study_and_trial_only_when_the_tuner_started_it(monkeypatch):
    from dataclasses import dataclass

    from cleanrl_utils.files.config import run_record
    from cleanrl_utils.files.sweeps import TUNER_VARIABLE

    @dataclass
    class Args:
        seed: int = 1

    monkeypatch.delenv(TUNER_VARIABLE, raising=False)
    assert "tuner" not in run_record(Args(), "run")
    monkeypatch.setenv(TUNER_VARIABLE, json.dumps({"study": "s", "trial": 3}))
    assert run_record(Args(), "run")["tuner"] == {"study": "s", "trial": 3}
    monkeypatch.setenv(TUNER_VARIABLE, json.dumps({"study": "s", "trial": 3, "sweep": "s-1"}))
    assert run_record(Args(), "run")["sweep"] == "s-1"  # (the study's: the report's --sweep)


# ---------------------------------------------------------------------------------------------
# The tools' faults (docs/faults.md, "the tools"): in process, or with a script of a few lines


def test_a_study_name_that_is_a_path_and_a_missing_search_space_are_one_error_line(
    tmp_path, monkeypatch, capsys
):
    from cleanrl_utils.tuner import Tuner
    from cleanrl_utils.tuner.cli import main
    from cleanrl_utils.tuner.trials import trial_exp_name

    monkeypatch.chdir(tmp_path)
    for extra, message in [
        (["--study-name", "../../esc"], "the study name '../../esc' cannot name its log folder"),
        (["--study-name", "/tmp/esc"], "cannot name its log folder"),
        (["--param"], "no --param: every trial would run the script's defaults again"),
        # its trials' exp names, `{study}-trial{N}`, would pass 100 characters: every run refused
        (
            ["--study-name", "s" * 97],
            f"the study name '{'s' * 97}' leaves no room for its trials' exp names (`"
            f"{'s' * 97}-trial999999`, over 100 characters): at most 88 characters",
        ),
    ]:
        command = bad_input_command([]) + extra
        if extra == ["--param"]:
            command = ["--script", str(PPO_ATARI_ENVPOOL)]
        with pytest.raises(SystemExit) as exit_:
            main(command)
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_.value.code == 2 and len(err) == 1 and message in err[0], err
    assert list(tmp_path.iterdir()) == [] and not (tmp_path.parent / "esc").exists()
    tuner = Tuner(str(PPO_ATARI_ENVPOOL), params_fn=dict, study_name="s" * 88, env_ids=["x"])
    assert len(trial_exp_name(tuner.settings.run_prefix, 999_999)) == 100  # the longest allowed
    with pytest.raises(RunError, match="at most 88 characters"):
        Tuner(str(PPO_ATARI_ENVPOOL), params_fn=dict, study_name="s" * 89, env_ids=["x"])
    # a leading `.` (a hidden folder) or `-` (a flag) of a study name is left out of exp names
    tuner = Tuner(str(PPO_ATARI_ENVPOOL), params_fn=dict, study_name="_.x y", env_ids=["x"])
    assert trial_exp_name(tuner.settings.run_prefix, 0) == "x-y-trial0"
    Path("taken").write_text("a file")
    with pytest.raises(SystemExit) as exit_:
        main(bad_input_command(["--log-dir", "taken"]))
    err = capsys.readouterr().err
    assert exit_.value.code == 74 and err == (
        "error: --log-dir taken/ppo_atari_envpool: cannot write there: taken is a file, not a folder\n"
    )


FAILING_SCRIPT = """import sys
from dataclasses import dataclass


@dataclass
class Args:  # the flags the tuner checks its search space against
    learning_rate: float = 2.5e-4
    env_id: str = "Breakout-v5"
    seed: int = 1
    exp_name: str = "diverges"


if __name__ == "__main__":
    print("the loss is NaN", file=sys.stderr)
    sys.exit(1)
"""


def learning_rate(trial) -> dict:
    return {"learning-rate": trial.suggest_float("learning-rate", 1e-4, 1e-3)}


def test_a_tuner_whose_trials_all_fail_exits_1_saying_so(tmp_path, monkeypatch, capsys):
    from cleanrl_utils.tuner import Tuner

    monkeypatch.chdir(tmp_path)
    script = tmp_path / "diverges.py"
    script.write_text(FAILING_SCRIPT)
    tuner = Tuner(
        script=str(script),
        params_fn=learning_rate,
        storage="sqlite:///tuner.db",
        study_name="fails",
        env_ids=["Breakout-v5"],
        pruner=optuna.pruners.NopPruner(),
        workers=2,
    )
    with pytest.raises(SystemExit) as exit_, entry_point():
        tuner.tune(num_trials=2, num_seeds=1)
    out = capsys.readouterr()
    assert exit_.value.code == 1, out
    (line,) = [line for line in out.err.splitlines() if line.startswith("error:")]
    first = r"every trial this tuner ran failed \(2; the first: trial [01], Breakout-v5 seed 1: exit code 1\)"
    assert re.search(first, line), line
    (log,) = (tmp_path / "tuner_logs/fails/trial_0000").iterdir()
    assert "the loss is NaN" in log.read_text()


# a script that writes, without training, one return per game and seed: the game's random score
# plus (seed / 2) of its human-random gap in the Atari-5 fit's table (atari5_fit_scores.csv)
ATARI3_VAL_SCRIPT = """import json, sys, time
from dataclasses import dataclass
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

FIT = {"Assault-v5": (222.39, 742.0), "MsPacman-v5": (307.3, 6951.6), "YarsRevenge-v5": (3092.91, 54576.9)}


@dataclass
class Args:  # the flags the tuner checks its search space against
    learning_rate: float = 2.5e-4
    env_id: str = "Assault-v5"
    seed: int = 1
    exp_name: str = "fake"


if __name__ == "__main__":
    argv = sys.argv[1:]
    env_id, seed = argv[argv.index("--env-id") + 1], int(argv[argv.index("--seed") + 1])
    exp_name = argv[argv.index("--exp-name") + 1]
    run = Path("runs") / f"{env_id}__{exp_name}__{seed}__{int(time.time())}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"args": {"total_timesteps": 10}}))
    random, human = FIT[env_id]
    value = summary_pb2.Summary.Value(tag="charts/episodic_return", simple_value=random + (human - random) * seed / 2)
    writer = EventFileWriter(str(run))
    writer.add_event(event_pb2.Event(wall_time=time.time(), step=10, summary=summary_pb2.Summary(value=[value])))
    writer.close()
"""


def test_a_study_on_atari3_val_maximises_the_atari3_val_estimate(tmp_path, monkeypatch, capsys):
    # one trial of 3 games x 1 seed, each run a tiny process: the objective is the model on the
    # games' HNS, 0.5 each (the mean over seeds: test_the_atari3_val_objective_is_...)
    from cleanrl_utils.report import atari5
    from cleanrl_utils.tuner import Tuner

    monkeypatch.chdir(tmp_path)
    (tmp_path / "fake.py").write_text(ATARI3_VAL_SCRIPT)
    tuner = Tuner(
        script="fake.py",
        params_fn=learning_rate,
        storage="sqlite:///tuner.db",
        study_name="atari3val",
        env_ids=["Assault-v5", "MsPacman-v5", "YarsRevenge-v5"],
        aggregation_type="atari3-val",
        pruner=optuna.pruners.NopPruner(),
    )
    best = tuner.tune(num_trials=1, num_seeds=1)  # the best trial
    expected = atari5.estimate("atari3-val", {g: 0.5 for g in atari5.GAME_SETS["atari3-val"]})
    assert best.value == pytest.approx(expected, rel=1e-6)
    out = capsys.readouterr().out
    assert "objective: maximize the Atari-3-Val estimate (%) of the 57-game median" in out
    assert "benchmark: python -m cleanrl_utils.benchmark --env-ids atari5 " in out


def test_a_tuner_file_whose_search_space_sets_no_flag_is_refused(tmp_path, monkeypatch, capsys):
    from cleanrl_utils.tuner import Tuner

    monkeypatch.chdir(tmp_path)
    script = tmp_path / "diverges.py"
    script.write_text(FAILING_SCRIPT)
    with pytest.raises(RunError, match="no search space"):
        Tuner(script=str(script), env_ids=["Breakout-v5"])
    tuner = Tuner(script=str(script), params_fn=lambda trial: {}, env_ids=["Breakout-v5"])
    with pytest.raises(SystemExit) as exit_, entry_point():
        tuner.tune(num_trials=2, num_seeds=1)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("error: the search space is empty"), err
    # nothing started (the bytecode of the script, which the probe imported, aside)
    assert [p for p in tmp_path.iterdir() if p.name != "__pycache__"] == [script]


def test_a_trial_whose_tuner_was_killed_before_it_saw_the_run_folder_resumes_that_run(
    tmp_path, monkeypatch
):
    """`kill -9` of a tuner between its run's start and the run folder's appearance: the
    trial records the run as running with no folder; the next tuner finds it by the trial's exp
    name, env id and seed (not an older study's folder of the same name) and resumes it."""
    import socket

    from cleanrl_utils.tuner import Tuner
    from cleanrl_utils.tuner.study import open_study, worker_id

    monkeypatch.chdir(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a tuner's pid that no process has any more
    tuner = Tuner(
        script=str(PPO_ATARI_ENVPOOL),
        params_fn=learning_rate,
        storage="sqlite:///tuner.db",
        study_name="killed",
        env_ids=["Breakout-v5"],
    )
    study = open_study(optuna.storages.InMemoryStorage(), "killed", "minimize")
    trial = study.ask({"learning-rate": optuna.distributions.FloatDistribution(1e-4, 1e-3)})
    host = socket.gethostname()
    trial.set_user_attr("worker", {"host": host, "pid": gone.pid, "slurm": None})
    process = {"host": host, "pid": gone.pid, "script": str(PPO_ATARI_ENVPOOL)}
    record = {"dir": None, "state": "running", "process": process}
    trial.set_user_attr("runs", {"Breakout-v5|1": record})
    started = int(study.trials[0].datetime_start.timestamp())
    older = tmp_path / f"runs/Breakout-v5__killed-trial0__1__{started - 3600}"
    orphan = tmp_path / f"runs/Breakout-v5__killed-trial0__1__{started + 1}"
    for folder in (older, orphan, tmp_path / f"runs/Breakout-v5__killed-trial0__2__{started}"):
        folder.mkdir(parents=True)

    tuner.recover_stale(study, worker_id())
    (waiting,) = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert waiting.user_attrs["resume_runs"]["Breakout-v5|1"]["dir"] == str(
        Path("runs", orphan.name)
    )
    assert waiting.user_attrs["resumes"] == 0 and study.trials[0].user_attrs["interrupted"]


def test_a_tuner_killed_outright_leaves_no_run_training_and_the_next_one_resumes_it(tmp_path):
    """`kill -9` of a tuner while its trial's run trains (tests/sweep_run.py, a real run whose
    iterations only log): the run finds its tuner gone at the end of its iteration, writes a
    checkpoint and stops; the same tuner command resumes it in its folder, every step once."""
    from logs_testing import read_scalars

    from cleanrl_utils.run.folder_guard import lock_holder

    (tmp_path / "slow").touch()  # (an iteration takes 0.1 s while it exists; seed 2: 400)
    args = [
        "--script", str(SWEEP_RUN), "--env-ids", "Breakout-v5",
        "--param", "num-steps=categorical:8", "--num-trials", "1", "--start-seed", "2",
        "--pruner", "none", "--storage", "sqlite:///tuner.db", "--study-name", "killed",
        "--metric-last-n-average-window", "4",
    ]  # fmt: skip
    proc = start_script(args, tmp_path, module="cleanrl_utils.tuner")
    deadline = time.monotonic() + 120
    while not list((tmp_path / "runs").glob("*/events.out.tfevents.*")):
        assert proc.poll() is None and time.monotonic() < deadline, describe(finish_script(proc))
        time.sleep(0.1)
    (run,) = (tmp_path / "runs").iterdir()
    proc.kill()  # kill -9: it can stop nothing
    finish_script(proc)
    deadline = time.monotonic() + 30
    while (holder := lock_holder(run.stat().st_ino)) != "unknown":  # the run ends by itself
        if time.monotonic() > deadline:
            os.kill(int(holder), signal.SIGKILL)
            raise AssertionError("the run trains on without its tuner")
        time.sleep(0.1)
    config = json.loads((run / "config.json").read_text())
    assert config["stopped"]["signal"] == "SIGTERM" and list_checkpoints(run)
    (log,) = (tmp_path / "tuner_logs" / "killed").glob("trial_0000/*.log")
    assert "the launcher that started this run (pid" in log.read_text()

    (tmp_path / "slow").unlink()
    again = run_script(args, tmp_path, module="cleanrl_utils.tuner", timeout=300)
    assert again.returncode == 0, describe(again)
    assert "[trial 1] start Breakout-v5 seed 2 (resumed)" in again.stdout, describe(again)
    assert list((tmp_path / "runs").iterdir()) == [run]
    config = json.loads((run / "config.json").read_text())
    assert config["finished"] and config["sweep"] == config["resumes"][0]["sweep"]
    assert again.stdout.splitlines()[-1].endswith(f"--sweep {config['sweep']}")
    steps = [step for step, _ in read_scalars(run, files=2)["charts/SPS"]]
    assert steps == list(range(8, 8 * 400 + 1, 8))  # every iteration once, across the stop


def test_trials_md_marks_a_resumed_trial_and_trials_png_draws_the_interrupted_one(
    tmp_path, monkeypatch
):
    from cleanrl_utils.tuner import Tuner
    from cleanrl_utils.tuner.results import figure, note_of

    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    tuner = Tuner(
        script=str(PPO_ATARI_ENVPOOL),
        params_fn=learning_rate,
        study_name="resumed",
        env_ids=["Breakout-v5", "Pong-v5"],
    )
    study = optuna.create_study(study_name="resumed", direction="maximize")
    stopped = {"dir": "runs/Breakout-v5__resumed-trial0__1__1", "state": "stopped"}
    first = study.ask()
    first.report(0.25, 1)
    first.set_user_attr("interrupted", True)
    study.tell(first, state=optuna.trial.TrialState.FAIL)
    study.enqueue_trial({}, user_attrs={"resumes": 0, "resume_runs": {"Breakout-v5|1": stopped}})
    study.tell(study.ask(), 0.5)
    note = note_of(study.trials[1])
    assert note.startswith("resumes trial 0; 1 run continued from a checkpoint on other games")

    fig = figure(study, tuner.settings)
    (ax,) = fig.axes
    fig.canvas.draw()
    assert all(float(x).is_integer() for x in ax.get_xticks())  # trials 0 and 1, no 0.5
    assert ax.get_ylabel().startswith(
        "average over games of human-normalised charts/episodic_return"
    )
    drawn = {
        (label, tuple(map(float, line.get_xdata())))
        for line, label in zip(ax.lines, [line.get_label() for line in ax.lines], strict=True)
    }
    assert ("interrupted: last value", (0.0,)) in drawn
    assert any(x == (0.0, 0.0) for _, x in drawn)  # the dotted line at the interrupted trial
    import matplotlib.pyplot as plt

    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# The fourth probe (issue 54): a storage on a full disk, or whose folder is not a folder


@pytest.fixture
def full_disk(tmp_path):
    """A tmpfs of 64 KiB, mounted for the test and filled."""
    if os.geteuid() != 0:
        pytest.skip("a full disk is a tmpfs mounted by the test: needs root (and mount)")
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        fd = os.open(mount / "fill", os.O_WRONLY | os.O_CREAT)
        try:
            with pytest.raises(OSError):
                while True:
                    os.write(fd, b"\0" * 4096)
        finally:
            os.close(fd)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("storage", ["journal:{}/t.log", "sqlite:///{}/t.db"])
def test_a_storage_on_a_full_disk_is_exit_74(full_disk, storage):
    """It was exit 2, as bad input; a full disk is 74, as everywhere else."""
    from cleanrl_utils.console.errors import DISK_EXIT
    from cleanrl_utils.tuner.study import open_study_in

    with pytest.raises(RunError) as error:
        open_study_in(storage.format(full_disk), "s", "maximize")
    assert error.value.code == DISK_EXIT, error.value
    assert "disk" in str(error.value) or "ENOSPC" in str(error.value), error.value


@pytest.mark.parametrize("storage", ["sqlite:////dev/full/x.db", "journal:/dev/full/x.log"])
def test_a_storage_whose_folder_is_not_a_folder_says_so(storage):
    """`/dev/full` exists: it was said not to."""
    from cleanrl_utils.tuner.storage import check_storage

    with pytest.raises(RunError) as error:
        check_storage(storage)
    assert ": /dev/full is not a folder, so it cannot hold the " in str(error.value)
    assert error.value.code == 2
