"""The throughput benchmark (`benchmark/throughput.py`): its arithmetic and command line in
process, one tiny real run of a script end to end, the bounds at tiny sizes, and a failing
script."""

from __future__ import annotations

import dataclasses
import importlib.util
import io
import json
import math
import sys

import pytest
from scripts_testing import REPO_ROOT, describe, finish_script, run_script, start_script

from cleanrl_utils.console.errors import RunError
from cleanrl_utils.console.progress import Progress

BENCHMARK = REPO_ROOT / "benchmark" / "throughput.py"
TINY = "--num-envs 2 --num-steps 16 --num-minibatches 2 --update-epochs 1"


def load_benchmark():
    # as `python benchmark/throughput.py` would: its folder first on the path, for the modules
    # beside it (the package, cleanrl_utils, is installed)
    sys.path.insert(0, str(BENCHMARK.parent))
    spec = importlib.util.spec_from_file_location("_throughput_under_test", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve string annotations through it
    spec.loader.exec_module(module)
    return module


tp = (
    load_benchmark()
)  # the command line; its flags and two halves, which it imports from beside it:
flags, measure = sys.modules["throughput_args"], sys.modules["throughput_measure"]
report = sys.modules["throughput_report"]


def table_row(text: str, first_cell: str) -> list[str]:
    """The cells of the plain-text table row that starts with `first_cell`."""
    (line,) = [line for line in text.splitlines() if line.split()[:1] == [first_cell]]
    return line.split()


# --- command line ---------------------------------------------------------------------------------


def test_defaults():
    args, sizes = tp.parse_args([])
    assert args.scripts == list(flags.SCRIPTS) and len(args.scripts) == 6
    assert (args.game, args.iterations, args.burn_in, args.repeats) == ("Breakout", 5, 1, 1)
    assert args.bounds and args.markdown is None and args.extra_args == ""
    assert (sizes.batch_size, sizes.minibatch_size, sizes.gradient_steps) == (1024, 256, 16)


def test_flags():
    args, sizes = tp.parse_args(
        [
            "--scripts",
            "cleanrl/ppo_atari.py",
            "ppo_atari_envpool_xla_jax.py",
            "ppo_atari_lstm",
            "--game",
            "Pong",
            "--iterations",
            "3",
            "--burn-in",
            "2",
            "--repeats",
            "4",
            "--no-bounds",
            "--extra-args=--num-envs 16 --num_steps=64 --update-epochs 2",
            "--markdown",
            "out.md",
        ]
    )
    assert args.scripts == ["ppo_atari", "ppo_atari_envpool_xla_jax", "ppo_atari_lstm"]
    assert (args.game, args.iterations, args.burn_in, args.repeats) == ("Pong", 3, 2, 4)
    assert not args.bounds and args.markdown == "out.md"
    assert dataclasses.astuple(sizes) == (16, 64, 4, 2)
    assert (sizes.batch_size, sizes.minibatch_size, sizes.gradient_steps) == (1024, 256, 8)


def test_script_flags_spellings_and_last_one_wins():
    """`--extra-args` read as the scripts read it (tyro): the sizes, the rest left for them."""
    sizes = sys.modules["machine"].Sizes
    argv = ["--num-envs", "4", "--seed", "3", "--num_envs=6"]
    assert measure.script_flags(argv, sizes) == (sizes(num_envs=6), ["--seed", "3"])
    assert measure.script_flags(argv[:2], sizes)[0].num_envs == 4
    assert measure.script_flags(["--num-steps=32"], sizes)[0].num_steps == 32
    assert measure.script_flags([], sizes) == (sizes(), [])
    rest = ["--help", "--update", "3", "--learning-rate", "-1"]  # no help, no abbreviations
    assert measure.script_flags(rest, sizes) == (sizes(), rest)


def test_the_benchmark_knows_every_script_of_cleanrl():
    """A script added to cleanrl/ is added here too, with the env it steps (one process, or
    many under torchrun)."""
    scripts = sorted(p.stem for p in (REPO_ROOT / "cleanrl").glob("ppo_*.py"))
    assert sorted(flags.KINDS) == scripts
    assert set(flags.KINDS.values()) <= set(measure.ENV_KINDS)


def test_env_ids():
    ids = {script: measure.env_id_for(script, "Breakout") for script in flags.SCRIPTS}
    assert ids == {
        "ppo_atari_envpool": "Breakout-v5",
        "ppo_atari": "BreakoutNoFrameskip-v4",
        "ppo_atari_lstm": "BreakoutNoFrameskip-v4",
        "ppo_atari_envpool_xla_jax": "Breakout-v5",
        "ppo_atari_envpool_xla_jax_scan": "Breakout-v5",
        "ppo_atari_ale_vector": "Breakout-v5",
    }
    assert measure.env_id_for("ppo_atari", "Pong") == "PongNoFrameskip-v4"
    # the bounds step the same env as the scripts, sized as they are
    _, sizes = tp.parse_args([f"--extra-args={TINY}"])
    params = measure.bound_params(tp.parse_args(["--scripts", "ppo_atari_lstm"])[0], sizes)
    assert params == {
        "gymnasium": {"env_id": "BreakoutNoFrameskip-v4", "num_envs": 2, "steps": 1000},
        "compute": {"sizes": dataclasses.asdict(sizes), "iterations": 2},
    }
    both = tp.parse_args(["--scripts", "ppo_atari_envpool", "ppo_atari_ale_vector"])[0]
    assert set(measure.bound_params(both, sizes)) == {"envpool", "ale_vector", "compute"}
    assert measure.bound_params(both, sizes)["ale_vector"]["env_id"] == "Breakout-v5"


def test_help_documents_every_flag(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exit_info:
        tp.main(["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    for f in dataclasses.fields(tp.Args):
        assert f"--{f.name.replace('_', '-')}" in text
    assert "--no-bounds" in text and "--markdown PATH" in text
    # every field has a docstring, which tyro shows
    assert "measured training iterations per script" in text
    assert "the fastest counts" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scripts", "ppo_atari_nope"], "unknown script 'ppo_atari_nope'"),
        (["--scripts", "ppo_atari", "cleanrl/ppo_atari.py"], "names a script twice"),
        (["--iterations", "0"], "--iterations must be at least 1"),
        (["--burn-in", "0"], "--burn-in must be at least 1"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--bound-steps", "0"], "--bound-steps must be at least 1"),
        (["--game", "Breakout-v5"], "--game takes a game's name"),
        (["--extra-args=--num-envs two"], "--extra-args: --num-envs: 'two' is not a whole number"),
        (["--extra-args=--num-envs"], "--extra-args: Missing value for argument '--num-envs'"),
        (["--iterations", "x"], "--iterations: 'x' is not a whole number"),
        (["--bogus"], "Unrecognized options: --bogus"),
        (["--extra-args=--num-envs 0"], "--num-envs in --extra-args must be at least 1"),
        (["--nproc", "3"], "--nproc 3 does not divide the 8 envs"),
        (["--scripts", "ppo_atari_dp"], "ppo_atari_envpool_multigpu"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tp.main(argv)
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""  # no work started
    (line,) = err.splitlines()
    assert line.startswith("error: ") and message in line


def test_bad_input_from_the_command_line(tmp_path):
    """Run as a script from another folder, as the docs show it (`python benchmark/throughput.py`,
    which edits no import path): the line; and `--help` prints the flags."""
    proc = run_script(["--iterations", "0"], tmp_path, script=BENCHMARK, timeout=120)
    assert proc.returncode == 2, describe(proc)
    assert proc.stderr.splitlines() == ["error: --iterations must be at least 1, got 0"]
    assert proc.stdout == ""
    proc = run_script(["--help"], tmp_path, script=BENCHMARK, timeout=120)
    assert proc.returncode == 0, describe(proc)
    assert "--bound-iterations" in proc.stdout and "--baseline DIR" in proc.stdout


# --- arithmetic -----------------------------------------------------------------------------------


def test_median_and_spread():
    assert report.median_spread([3.0]) == (3.0, 3.0, 3.0)
    assert report.median_spread([5.0, 1.0, 4.0]) == (4.0, 1.0, 5.0)
    assert report.median_spread([4.0, 1.0, 2.0, 10.0]) == (3.0, 1.0, 10.0)


def test_bounds_arithmetic():
    # an env at 1,000 steps/s and compute at 1,000 steps/s, done in turn: 500 steps/s
    assert report.in_turn(1000.0, 1000.0) == pytest.approx(500.0)
    assert report.in_turn(3000.0, 1500.0) == pytest.approx(1000.0)
    assert report.in_turn(1000.0, 3000.0) < min(1000.0, 3000.0)
    assert report.fraction_of_bound(250.0, 1000.0) == 0.25


def test_steady_sps_and_first_iteration():
    # 1,024 steps per iteration; the first one takes 10 s (compilation), then 2 s each
    times = [10.0, 12.0, 14.0, 16.0]
    assert measure.steady_sps(times, 1024, burn_in=1) == pytest.approx(1024 / 2)
    assert measure.steady_sps(times, 1024, burn_in=2) == pytest.approx(1024 / 2)
    phases = {p: [1.0] * len(times) for p in measure.PHASES}
    run = measure.Measurement(
        "ppo_atari_envpool_xla_jax", 1024, times, 256.0, [], 20.0, 900.0, 1, phases
    )
    assert run.iteration_s == pytest.approx(2.0)
    assert run.first_extra_s == pytest.approx(8.0)
    assert run.startup_s == pytest.approx(4.0)
    with pytest.raises(ValueError):
        measure.steady_sps(times, 1024, burn_in=4)


def test_outside_sps_reads_the_progress_lines_the_scripts_print():
    stream = io.StringIO()
    stream.isatty = lambda: False
    progress = Progress(4096, stream=stream)
    progress.update(1024, 100.0, None)
    progress.update(4096, 100.0, 1.5)
    steps = [
        int(measure.PROGRESS_LINE.match(line).group(1)) for line in stream.getvalue().splitlines()
    ]
    assert steps == [1024, 4096]
    assert measure.outside_sps([(5.0, 1024), (8.0, 2048), (11.0, 4096)]) == pytest.approx(3072 / 6)
    assert math.isnan(measure.outside_sps([(5.0, 1024)])) and math.isnan(measure.outside_sps([]))


def test_summary_rows_and_fraction_of_bound():
    def run(script, sps, last_sps):
        times = [1.0 + i * 1024 / sps for i in range(4)]
        progress = [(3.0, 1024), (3.0 + 3 * 1024 / sps, 4096)]
        phases = {p: [0.5] * len(times) for p in measure.PHASES}
        return measure.Measurement(
            script, 1024, times, last_sps, progress, times[-1] + 5.0, 800.0, 1, phases
        )

    runs = {
        "ppo_atari_envpool": [run("ppo_atari_envpool", s, 400.0) for s in (500, 300, 400)],
        "ppo_atari": [run("ppo_atari", 200, 150.0)],
    }
    bound_runs = {
        "envpool": [{"sps": 2000.0, "num_envs": 8}] * 3,
        "gymnasium": [{"sps": 1000.0, "num_envs": 8}] * 3,
        "compute": [
            {
                "sps": 1024 / t,
                "forward_s": 0.2 * t,
                "update_s": 0.8 * t,
                "device": "cpu",
                "threads": 2,
            }
            for t in (0.5, 0.6, 0.4)
        ],
    }
    summary = report.summarize(runs, bound_runs)
    assert summary.steady_sps == pytest.approx({"ppo_atari_envpool": 400, "ppo_atari": 200})
    assert summary.bounds["compute"] == pytest.approx(2048)
    assert summary.bounds["envpool + compute"] == pytest.approx(1 / (1 / 2000 + 1 / 2048))
    assert summary.bounds["gymnasium + compute"] == pytest.approx(1 / (1 / 1000 + 1 / 2048))
    envpool_row, gym_row = summary.script_rows
    # script, steady SPS, spread, s/iter, phases, 1st iter +, startup, peak MiB, own, outside,
    # ratio, bound
    assert envpool_row[:3] == ["ppo_atari_envpool", "400", "300-500"]
    assert envpool_row[3] == f"{1024 / 400:.2f} s" and envpool_row[6] == "5.0 s"
    assert envpool_row[4] == "0.50 + 0.50 + 0.50 s"
    assert envpool_row[8:11] == ["400", "400", "1.00"]
    assert envpool_row[11] == f"{100 * 400 / summary.bounds['envpool + compute']:.0f}%"
    assert gym_row[2] == "-" and gym_row[10] == "0.75"
    assert gym_row[11] == f"{100 * 200 / summary.bounds['gymnasium + compute']:.0f}%"
    labels = [row[0] for row in summary.bound_rows]
    assert labels[:2] == ["EnvPool alone", "gymnasium + wrappers alone"]
    assert "0.10 s rollout forward passes + 0.40 s gradient steps" in summary.bound_rows[2][2]


# --- real runs ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_tiny_run_end_to_end(tmp_path):
    markdown = tmp_path / "OUT.md"
    argv = ["--scripts", "ppo_atari_envpool", "--iterations", "1", "--burn-in", "1"]
    argv += [f"--extra-args={TINY}", "--no-bounds", "--markdown", str(markdown)]
    proc = run_script(argv, tmp_path, script=BENCHMARK, timeout=300)
    assert proc.returncode == 0, describe(proc)
    row = table_row(proc.stdout, "ppo_atari_envpool")
    steady = float(row[1].replace(",", ""))
    assert steady > 0
    assert "of bound" in proc.stdout and row[-1] == "-"  # no bounds measured
    assert "EnvPool alone" not in proc.stdout and "+ bound" not in proc.stdout
    text = markdown.read_text()
    machine = next(line for line in text.splitlines() if line.startswith("Machine: "))
    assert (
        "CPUs (" in machine and "usable)" in machine and "torch " in machine and "jax " in machine
    )
    assert "GPU" in machine  # a GPU's name, or "no GPU"
    assert "| script | steady SPS |" in text
    (md_row,) = [line for line in text.splitlines() if line.startswith("| `ppo_atari_envpool`")]
    assert md_row.split("|")[2].strip() == row[1]


@pytest.mark.slow
def test_bounds_at_tiny_sizes(tmp_path):
    """Each bound in its own process, all three at once (a second each, after their imports)."""
    sizes = {"num_envs": 2, "num_steps": 4, "num_minibatches": 2, "update_epochs": 1}
    measurements = {
        "envpool": {"env_id": "Breakout-v5", "num_envs": 2, "steps": 20},
        "gymnasium": {"env_id": "BreakoutNoFrameskip-v4", "num_envs": 2, "steps": 20},
        "compute": {"sizes": sizes, "iterations": 1},
    }
    started = {
        kind: start_script(
            [measure.BOUND_FLAG, kind, json.dumps(params)], tmp_path, script=BENCHMARK
        )
        for kind, params in measurements.items()
    }
    results = {}
    for kind, popen in started.items():
        proc = finish_script(popen, timeout=300)
        assert proc.returncode == 0, describe(proc)
        (line,) = [line for line in proc.stdout.splitlines() if line.startswith("result: ")]
        results[kind] = json.loads(line.removeprefix("result: "))
    assert results["envpool"]["sps"] > 0 and results["gymnasium"]["sps"] > 0
    compute = results["compute"]
    assert compute["forward_s"] > 0 and compute["update_s"] > 0
    assert compute["sps"] == pytest.approx(8 / (compute["forward_s"] + compute["update_s"]))


@pytest.mark.slow
def test_the_ale_vector_bound_steps_the_scripts_env(tmp_path):
    """ALE's vector env as `ppo_atari_ale_vector.py` builds it, alone (a test of its own: it
    needs ale-py 0.12, which `.ci/lowest-versions` leaves out)."""
    params = {"env_id": "Breakout-v5", "num_envs": 2, "steps": 20}
    argv = [measure.BOUND_FLAG, "ale_vector", json.dumps(params)]
    proc = run_script(argv, tmp_path, script=BENCHMARK, timeout=300)
    assert proc.returncode == 0, describe(proc)
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("result: ")]
    result = json.loads(line.removeprefix("result: "))
    assert result["num_envs"] == 2 and result["sps"] > 0


@pytest.mark.slow
def test_failing_script_shows_its_output_and_exits_non_zero(tmp_path):
    argv = ["--scripts", "ppo_atari_envpool", "--no-bounds", "--extra-args=--learning-rate x"]
    proc = run_script(argv, tmp_path, script=BENCHMARK, timeout=300)
    assert proc.returncode == 1, describe(proc)
    assert proc.stderr.startswith("error: ")
    assert "failed with exit code 2" in proc.stderr
    assert "--learning-rate" in proc.stderr  # the script's own complaint, from its log
    assert "steady SPS" not in proc.stdout


def test_baseline_must_be_a_checkout_with_the_scripts(tmp_path):
    with pytest.raises(RunError, match="has no cleanrl/ppo_atari_envpool.py"):
        tp.parse_args(["--scripts", "ppo_atari_envpool", "--baseline", str(tmp_path)])
    args, _ = tp.parse_args(
        ["--scripts", "ppo_atari_envpool", "--baseline", str(measure.REPO_ROOT)]
    )
    assert args.baseline == str(measure.REPO_ROOT)


def test_baseline_ratios_pair_each_run_with_the_baseline_run_before_it():
    def run(script, sps):
        times = [1.0 + i * 1024 / sps for i in range(4)]
        phases = {p: [0.5] * 4 for p in measure.PHASES}
        return measure.Measurement(script, 1024, times, sps, [], 10.0, 800.0, 1, phases)

    runs = {
        "ppo_atari_envpool (baseline)": [run("ppo_atari_envpool", s) for s in (400, 200)],
        "ppo_atari_envpool": [run("ppo_atari_envpool", s) for s in (600, 260)],
    }
    text = report.baseline_ratios(runs, ["ppo_atari_envpool"])
    assert text.splitlines()[1] == "  ppo_atari_envpool: 1.50, 1.30 (1.40)"


def test_a_multi_process_script_runs_under_torchrun_with_the_same_batch():
    args, sizes = tp.parse_args(
        ["--scripts", "ppo_atari_envpool_multigpu", "--extra-args=--num_envs=16"]
    )
    command = measure.script_command("ppo_atari_envpool_multigpu", args, sizes)
    assert command[1:5] == ["-m", "cleanrl_utils.torchrun", "--standalone", "--nproc_per_node=2"]
    assert command[5].endswith("cleanrl/ppo_atari_envpool_multigpu.py")
    assert "--num_envs=16" not in command and command[command.index("--local-num-envs") + 1] == "8"
    assert command[-2:] == ["--total-timesteps", str(6 * 16 * 128)]  # 1 + 5 iterations
    single = measure.script_command("ppo_atari_envpool", args, sizes)
    assert single[1].endswith("cleanrl/ppo_atari_envpool.py") and "--num_envs=16" in single
    argv = ["--num-envs", "4", "--x", "--num_envs=2", "1"]
    assert measure.script_flags(argv, measure.NumEnvs)[1] == ["--x", "1"]


def test_the_gpu_check_on_a_machine_without_gpus_says_which_parts_it_skipped_and_why(tmp_path):
    import os
    import subprocess

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "benchmark" / "gpu_check.sh")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, describe(done)
    parts = ["eager", "--compile", "--cudagraphs", "the JAX script", "data-parallel scripts"]
    lines = done.stdout.strip().splitlines()
    # the JAX multi-device part has its own block and reason
    jax_lines = [line for line in lines if "JAX on every GPU" in line]
    assert jax_lines == [
        "skipped: JAX on every GPU: needs 2 GPUs that JAX sees, it sees 0 "
        "(its CUDA plugins: docs/installation.md)"
    ], describe(done)
    lines = [line for line in lines if line not in jax_lines]
    assert len(lines) == len(parts), describe(done)
    for line, part in zip(lines, parts):
        assert line.startswith("skipped: ") and part in line and "no CUDA GPU" in line, line
