"""`cleanrl/ppo_atari_envpool_xla_jax_scan_multigpu.py`, the scan script on every JAX device, on
two CPU devices (`XLA_FLAGS=--xla_force_host_platform_device_count=2`): the same envs and seeds
give the same games and losses as the one-device script, to float rounding; it saves, evaluates
and resumes as its sibling does; envs or minibatches that do not split over the devices are one
`error:` line. The runs are started together, once per module (the first JIT compile dominates).
"""

from __future__ import annotations

import re

import pytest
from logs_testing import read_scalars
from scripts_testing import (
    REPO_ROOT,
    ScriptProcess,
    assert_usage_error,
    describe,
    module_runs,
    run_script,
    script_env,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
    pytest.mark.xdist_group(__name__),
]

ONE_DEVICE = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax_scan.py"
MULTI = REPO_ROOT / "cleanrl" / "ppo_atari_envpool_xla_jax_scan_multigpu.py"
TWO_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
# 3 iterations of 4 envs x 6 steps, 2 epochs of 2 minibatches: each device holds 2 envs and
# computes 6 of each minibatch's 12 transitions
SMALL = "--num-envs 4 --num-steps 6 --update-epochs 2 --num-minibatches 2 --total-timesteps 72"
SMALL += " --seed 3 --checkpoint-every 2"
RUNS = {
    "one_device": (ONE_DEVICE, SMALL.split()),
    "two_devices": (MULTI, f"{SMALL} --save-model --eval-episodes 1".split(), TWO_DEVICES),
}


def run(args, cwd, **kw):
    """The script on two devices, to its end."""
    return run_script(args, cwd, script=MULTI, env=script_env(cwd, **TWO_DEVICES), **kw)


@pytest.fixture(scope="module", autouse=True)
def runs(request, tmp_path_factory):
    yield from module_runs(request, tmp_path_factory, RUNS, check=True)


@pytest.fixture(scope="module")
def one_device(runs) -> ScriptProcess:
    return runs["one_device"]


@pytest.fixture(scope="module")
def two_devices(runs) -> ScriptProcess:
    return runs["two_devices"]


@pytest.mark.slow
def test_two_devices_play_the_same_games_and_log_the_losses_of_one(one_device, two_devices):
    """Each device's EnvPool holds the one-device pool's envs (seeds included) and draws their
    rows of its action noise; each computes its share of the one-device minibatch: every
    iteration's update is the one-device update, so the later iterations' rollouts are too."""
    a, b = one_device.scalars, two_devices.scalars
    losses = sorted(tag for tag in a if tag.startswith("losses/"))
    assert len(losses) == 8 and sorted(t for t in b if t.startswith("losses/")) == losses
    for tag in [*losses, "charts/learning_rate"]:
        assert [s for s, _ in b[tag]] == [s for s, _ in a[tag]] == [24, 48, 72], tag
        for (_, x), (_, y) in zip(a[tag], b[tag]):
            assert y == pytest.approx(x, rel=1e-4, abs=1e-6), (tag, a[tag], b[tag])
    assert a.get("charts/episodic_return") == b.get("charts/episodic_return")


@pytest.mark.slow
def test_two_devices_save_the_model_and_evaluate_it(two_devices):
    name = "ppo_atari_envpool_xla_jax_scan_multigpu"
    assert re.fullmatch(rf"Breakout-v5__{name}__3__\d+", two_devices.run_dir.name)
    assert (two_devices.run_dir / f"{name}.cleanrl_model").is_file()
    evals = two_devices.scalars.get("eval/episodic_return")
    assert evals is not None and [step for step, _ in evals] == [72], evals


@pytest.mark.slow
def test_two_devices_resume_from_a_checkpoint(two_devices):
    """From its checkpoint of iteration 2 the run carries on to iteration 3 on new games, with
    the learning rate of the run that went straight through."""
    checkpoint = two_devices.run_dir / "checkpoint_0000002.ckpt"
    straight = two_devices.scalars["charts/learning_rate"]
    proc = run(["--resume", str(checkpoint)], two_devices.cwd)
    assert proc.returncode == 0, describe(proc)
    assert "resum" in proc.stdout + proc.stderr
    resumed = read_scalars(two_devices.run_dir, files=None)["charts/learning_rate"]
    assert resumed == straight


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--num-envs", "3"], ["--num-envs 3", "2 devices", "multiple of 2"]),
        (  # a batch of 2 x 3, minibatches of 3
            ["--num-envs", "2", "--num-steps", "3", "--num-minibatches", "2"],
            ["minibatch size 3", "2 devices"],
        ),
    ],
    ids=["envs", "minibatch"],
)
def test_what_does_not_split_over_the_devices_is_one_error_line(tmp_path, args, expected):
    proc = run(args, tmp_path, timeout=120)
    assert_usage_error(proc, tmp_path, expected)
