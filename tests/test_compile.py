"""`--compile` and `--cudagraphs` of the torch scripts. Compiled functions must compute what the
eager ones compute (the loss, its gradients, GAE), and a compiled run must train and log like an
eager one, with the same numbers. CUDA graphs need a GPU: without one, `--cudagraphs` is bad input.
"""

from __future__ import annotations

import math
import re
import types

import pytest
import torch
from logs_testing import LOGGED_EVERY_ITERATION
from loss_testing import as_minibatch, make_agent, make_args, make_batch
from scripts_testing import REPO_ROOT, ScriptProcess, assert_usage_error, module_runs, run_script

import cleanrl.ppo_atari_envpool as envpool_script

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

PPO_ATARI = REPO_ROOT / "cleanrl" / "ppo_atari.py"
# 2 iterations of 4 envs x 16 steps, 2 minibatches of 32: every compiled function runs twice
SMALL = [
    *["--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2"],
    *["--update-epochs", "1", "--total-timesteps", "128", "--compile"],
]
# dynamo says what it traces: the proof that a run compiled (the compiled graphs themselves may
# come from the session's cache: tests/conftest.py)
TRACED = {"TORCH_LOGS": "dynamo"}
COMPILED = ("get_action_and_value", "compute_advantages", "ppo_loss")
COMPILED_RUNS = {
    "envpool_run": (REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py", SMALL, TRACED),
    "eager_envpool_run": (
        REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py",
        [arg for arg in SMALL if arg != "--compile"],
        TRACED,
    ),
}


@pytest.fixture(scope="module", autouse=True)
def compiled_runs(request, tmp_path_factory):
    """Started with the module's first test: the in-process and bad-input tests, which come
    first, overlap the runs' compilations (a minute of CPU each, cold)."""
    yield from module_runs(request, tmp_path_factory, COMPILED_RUNS, check=True)


@pytest.fixture(scope="module")
def envpool_run(compiled_runs) -> ScriptProcess:
    return compiled_runs["envpool_run"]


@pytest.fixture(scope="module")
def eager_envpool_run(compiled_runs) -> ScriptProcess:
    return compiled_runs["eager_envpool_run"]


@pytest.fixture(scope="module")
def gymnasium_run(envpool_run, tmp_path_factory):
    """Started once `envpool_run` has ended: the gymnasium script compiles the same functions at
    the same sizes, and finds most of them in the cache that run filled."""
    envpool_run.proc  # noqa: B018  (over)
    run = ScriptProcess(tmp_path_factory.mktemp("gymnasium_run"), PPO_ATARI, SMALL, True, TRACED)
    yield run
    run.stop()


def traced(run: ScriptProcess) -> list[str]:
    """The functions dynamo traced in the run, in order."""
    return re.findall(r"torchdynamo start tracing (\w+)", run.proc.stderr)


@pytest.fixture
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    torch._dynamo.reset()


def loss_and_gradients(loss_fn, agent, args, batch):
    agent.zero_grad()
    loss, stats = loss_fn(agent, args, as_minibatch(batch, envpool_script.Rollout))
    loss.backward()
    return loss.detach(), stats, [p.grad.clone() for p in agent.parameters()]


@pytest.mark.slow
def test_compiled_loss_gradients_and_gae_equal_eager(one_torch_thread):
    agent, args = make_agent(), make_args()
    batch = make_batch(agent)
    loss, stats, grads = loss_and_gradients(envpool_script.ppo_loss, agent, args, batch)
    compiled = torch.compile(envpool_script.ppo_loss, dynamic=False)
    c_loss, c_stats, c_grads = loss_and_gradients(compiled, agent, args, batch)
    torch.testing.assert_close(c_loss, loss, rtol=1e-5, atol=1e-6)
    for name in stats:
        torch.testing.assert_close(c_stats[name], stats[name], rtol=1e-5, atol=1e-6)
    for g, c_g in zip(grads, c_grads):
        torch.testing.assert_close(c_g, g, rtol=1e-4, atol=1e-6)

    gen = torch.Generator().manual_seed(2)
    num_steps, num_envs = 16, 3
    sizes = types.SimpleNamespace(num_steps=num_steps, num_envs=num_envs)
    rollout = envpool_script.Rollout.zeros(sizes, (4, 84, 84), "cpu")  # what the script passes
    rollout.rewards = torch.randn(num_steps, num_envs, generator=gen)
    rollout.values = torch.randn(num_steps, num_envs, generator=gen)
    next_value = torch.randn(num_envs, generator=gen)
    rollout.terminations = (torch.rand(num_steps, num_envs, generator=gen) < 0.1).float()
    rollout.truncations = (torch.rand(num_steps, num_envs, generator=gen) < 0.1).float()
    gae_inputs = (rollout, next_value, 0.99, 0.95)
    expected = envpool_script.compute_advantages(*gae_inputs)
    got = torch.compile(envpool_script.compute_advantages, dynamic=False)(*gae_inputs)
    for x, y in zip(got, expected):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("script", [REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py", PPO_ATARI])
def test_cudagraphs_without_a_gpu_is_bad_input(tmp_path, script):
    proc = run_script(["--cudagraphs"], tmp_path, script=script, timeout=120)
    assert_usage_error(proc, tmp_path, ["--cudagraphs", "GPU"])


@pytest.mark.slow
def test_compiled_runs_train_and_log_every_iteration(envpool_run, gymnasium_run):
    for run in (envpool_run, gymnasium_run):
        scalars = run.scalars
        assert sorted(set(traced(run))) == sorted(COMPILED), traced(run)
        for tag in LOGGED_EVERY_ITERATION:
            assert [step for step, _ in scalars.get(tag, [])] == [64, 128], (tag, sorted(scalars))
            if tag != "losses/explained_variance":
                assert all(math.isfinite(value) for _, value in scalars[tag]), (tag, scalars[tag])
        # the second iteration trained on what the first one learned: its policy moved
        assert scalars["losses/approx_kl"][1][1] > 0


@pytest.mark.slow
def test_compiled_run_learns_what_the_eager_run_learns(envpool_run, eager_envpool_run):
    # the same seed samples the same actions: the same losses, up to float rounding
    compiled, eager = envpool_run.scalars, eager_envpool_run.scalars
    assert traced(eager_envpool_run) == []
    for tag in sorted(t for t in LOGGED_EVERY_ITERATION if t.startswith("losses/")):
        assert [step for step, _ in compiled[tag]] == [step for step, _ in eager[tag]]
        for (_, x), (_, y) in zip(compiled[tag], eager[tag]):
            assert x == pytest.approx(y, rel=1e-3, abs=1e-6, nan_ok=True), (tag, x, y)
