"""`cleanrl/ppo_atari_lstm.py`: the recurrent forward pass, where the LSTM state is zeroed, that
the update starts from the rollout's own log-probabilities, and the script end to end (the
user-known smoke line, determinism, save then evaluate, bad input). The wrappers and episode
boundaries are those of `ppo_atari.py` (frame stack 1), tested in its files.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch.optim as optim
from atari_testing import BREAKOUT, one_torch_thread
from logs_testing import read_scalars
from scripts_testing import REPO_ROOT, assert_usage_error, describe, module_runs, run_script

from cleanrl.ppo_atari_lstm import (
    Agent,
    Args,
    EpisodeStatistics,
    Rollout,
    collect_rollout,
    compute_advantages,
    make_env,
    ppo_loss,
    update,
)

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

__all__ = ["one_torch_thread"]  # the module's autouse fixture

SCRIPT = REPO_ROOT / "cleanrl" / "ppo_atari_lstm.py"
SMOKE = ["--num-envs", "4", "--num-steps", "64", "--total-timesteps", "256"]
RUNS = {
    # the command users know, as written, twice: the same seed gives the same losses
    "smoke_run": SMOKE,
    "smoke_run_again": SMOKE,
    "eval_run": [
        # 2 x 256 steps: long enough for a random agent to end a game of Breakout in training
        *["--num-envs", "2", "--num-steps", "256", "--total-timesteps", "512"],
        *["--num-minibatches", "2", "--update-epochs", "1", "--save-model", "--eval-episodes", "2"],
    ],
}


@pytest.fixture(scope="module", autouse=True)
def runs(request, tmp_path_factory):
    """Started with the module's first test: the in-process tests before the runs' overlap them."""
    yield from module_runs(request, tmp_path_factory, RUNS, script=SCRIPT)


@pytest.fixture(scope="module")
def smoke_run(runs):
    return runs["smoke_run"]


@pytest.fixture(scope="module")
def smoke_run_again(runs):
    return runs["smoke_run_again"]


@pytest.fixture(scope="module")
def eval_run(runs):
    return runs["eval_run"]


@pytest.fixture(scope="module")
def envs():
    envs = make_env(BREAKOUT, 2, seed=1)
    yield envs
    envs.close()


@pytest.fixture(scope="module")
def agent(envs):
    torch.manual_seed(1)
    return Agent(envs)


def random_sequence(steps, num_envs, seed=0):
    generator = torch.Generator().manual_seed(seed)
    obs = torch.randint(
        0, 256, (steps * num_envs, 1, 84, 84), dtype=torch.uint8, generator=generator
    )
    state = tuple(torch.randn(1, num_envs, 128, generator=generator) for _ in range(2))
    return obs, state


def test_observations_are_one_frame_and_the_lstm_is_initialised_orthogonal_with_zero_bias(
    envs, agent
):
    assert envs.single_observation_space.shape == (1, 84, 84)
    assert agent.network[0].in_channels == 1
    assert (agent.lstm.input_size, agent.lstm.hidden_size) == (512, 128)
    eye = torch.eye(128 * 4)
    torch.testing.assert_close(agent.lstm.weight_ih_l0 @ agent.lstm.weight_ih_l0.T, eye)
    torch.testing.assert_close(agent.lstm.weight_hh_l0.T @ agent.lstm.weight_hh_l0, torch.eye(128))
    assert not agent.lstm.bias_ih_l0.any() and not agent.lstm.bias_hh_l0.any()
    zeros = agent.initial_state(3)
    assert all(s.shape == (1, 3, 128) and not s.any() for s in zeros)


def test_forward_over_a_sequence_equals_step_by_step_forward(agent):
    steps, num_envs = 6, 2
    obs, state = random_sequence(steps, num_envs)
    done = torch.zeros(steps * num_envs)
    done[2 * num_envs + 1] = 1.0  # env 1's episode ended before step 2
    with torch.no_grad():
        whole, whole_state = agent.get_states(obs, state, done)
        parts, step_state = [], state
        for t in range(steps):
            rows = slice(t * num_envs, (t + 1) * num_envs)
            out, step_state = agent.get_states(obs[rows], step_state, done[rows])
            parts.append(out)
    torch.testing.assert_close(whole, torch.cat(parts), rtol=1e-5, atol=1e-5)
    for a, b in zip(whole_state, step_state):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_done_in_the_middle_of_a_sequence_zeroes_the_state_exactly_there(agent):
    steps, num_envs, cut = 6, 2, 3
    obs, state = random_sequence(steps, num_envs)
    done = torch.zeros(steps, num_envs)
    done[cut, 0] = 1.0  # env 0's episode ended before step `cut`
    with torch.no_grad():
        out = agent.get_states(obs, state, done.flatten())[0].reshape(steps, num_envs, -1)
        no_done = agent.get_states(obs, state, torch.zeros(steps * num_envs))[0]
        no_done = no_done.reshape(steps, num_envs, -1)
        # env 0 from `cut` on, started from a zero state
        env0_obs = obs.reshape(steps, num_envs, 1, 84, 84)[cut:, 0]
        fresh = agent.get_states(env0_obs, agent.initial_state(1), torch.zeros(steps - cut))[0]
    torch.testing.assert_close(out[:cut], no_done[:cut])  # nothing changes before the done
    torch.testing.assert_close(out[cut:, 0], fresh, rtol=1e-5, atol=1e-5)  # zeroed there
    assert not torch.allclose(out[cut:, 0], no_done[cut:, 0], atol=1e-3)  # (it mattered)
    torch.testing.assert_close(out[:, 1], no_done[:, 1])  # the other env is untouched


def test_the_stored_initial_state_reproduces_the_rollout_so_the_update_starts_at_ratio_1(
    envs, agent
):
    args = Args(num_envs=2, num_steps=48, num_minibatches=2)
    rollout = Rollout.zeros(args, (1, 84, 84), "cpu")
    stats = EpisodeStatistics(args.num_envs)
    obs, _ = envs.reset()
    carried = (torch.from_numpy(obs), torch.zeros(2), agent.initial_state(2))
    for _ in range(2):  # the second rollout starts from a carried, non-zero state
        initial_state = tuple(s.clone() for s in carried[2])
        *carried, _ = collect_rollout(agent, envs, rollout, *carried, stats)
    assert initial_state[0].abs().sum() > 0
    assert 0 < rollout.dones[1:].sum(), "no episode ended inside the rollout: pick another seed"

    def replay(state):
        with torch.no_grad():
            _, logprob, _, value, _ = agent.get_action_and_value(
                rollout.obs.flatten(0, 1), state, rollout.dones.flatten(), rollout.actions.flatten()
            )
        return logprob.reshape(args.num_steps, -1), value.reshape(args.num_steps, -1)

    logprobs, values = replay(initial_state)
    torch.testing.assert_close(logprobs, rollout.logprobs, rtol=0, atol=1e-5)
    torch.testing.assert_close(values, rollout.values, rtol=0, atol=1e-5)
    wrong, _ = replay(agent.initial_state(2))  # (a zero state would not reproduce them)
    assert not torch.allclose(wrong[:5], rollout.logprobs[:5], atol=1e-5)

    # the update, with a zero learning rate: every minibatch (one whole env sequence) sees ratio 1
    with torch.no_grad():
        next_value = agent.get_value(carried[0], carried[2], carried[1]).flatten()
        advantages, returns = compute_advantages(rollout, next_value, args.gamma, args.gae_lambda)
    before = [p.clone() for p in agent.parameters()]
    optimizer = optim.Adam(agent.parameters(), lr=0.0, eps=1e-5)
    result = update(ppo_loss, agent, optimizer, args, rollout, advantages, returns, initial_state)
    assert all(torch.equal(a, b) for a, b in zip(before, agent.parameters()))
    assert result["clipfrac"] == 0
    assert abs(result["approx_kl"]) < 1e-9 and abs(result["old_approx_kl"]) < 1e-5


def test_a_truncated_episode_bootstraps_from_its_final_observation(agent):
    # seed 3, a 400-frame limit: the first game is cut by the time limit within 100 steps
    envs = make_env(BREAKOUT, 1, seed=3, max_num_frames_per_episode=400)
    rollout = Rollout.zeros(Args(num_steps=100, num_envs=1), (1, 84, 84), "cpu")
    obs, _ = envs.reset()
    start = (torch.from_numpy(obs), torch.zeros(1), agent.initial_state(1))
    *_, finished = collect_rollout(agent, envs, rollout, *start, EpisodeStatistics(1))
    envs.close()
    cut = rollout.truncations[:, 0].nonzero().flatten().tolist()
    assert len(cut) == 1 and [step for step, *_ in finished] == cut, (cut, finished)
    assert rollout.final_values[cut[0], 0] != 0
    assert int((rollout.final_values != 0).sum()) == 1
    assert rollout.dones[cut[0] + 1, 0] == 1  # and the next episode starts from a zero state


@pytest.mark.slow
def test_user_known_smoke_command_runs_and_the_same_seed_gives_identical_losses(
    smoke_run, smoke_run_again
):
    first, second = smoke_run.ok(), smoke_run_again.ok()
    assert re.fullmatch(r"BreakoutNoFrameskip-v4__ppo_atari_lstm__1__\d+", first.run_dir.name)
    a, b = read_scalars(first.run_dir), read_scalars(second.run_dir)
    losses = sorted(tag for tag in a if tag.startswith("losses/"))
    assert len(losses) == 7
    for tag in losses:
        assert [step for step, _ in a[tag]] == [256], tag
        assert a[tag] == b[tag], tag
    assert a["charts/learning_rate"] == [(256, pytest.approx(2.5e-4))]


@pytest.mark.slow
def test_save_model_then_evaluate_gives_the_same_games(eval_run):
    run = eval_run.ok()
    scalars = read_scalars(run.run_dir)
    assert scalars.get("charts/episodic_return"), sorted(scalars)
    in_process = [value for _, value in scalars["eval/episodic_return"]]
    assert len(in_process) == 2 and all(r >= 0 and r.is_integer() for r in in_process)
    model = run.run_dir / "ppo_atari_lstm.cleanrl_model"
    args = ["--model-path", model.relative_to(run.cwd), "--eval-episodes", "2", "--seed", "2"]
    proc = run_script(args, run.cwd, module="cleanrl_utils.evals")
    assert proc.returncode == 0, describe(proc)
    printed = re.findall(r"^eval_episode=\d+, episodic_return=([\d.]+)", proc.stdout, re.M)
    assert [float(r) for r in printed] == in_process


@pytest.mark.slow
def test_bad_input_fails_fast(tmp_path):
    # the script as a process: exit code 2 and one error line before any folder is made (6 x 128
    # steps divide into 4 minibatches, 6 whole env sequences do not); the whole table of bad
    # input is in test_checks.py, in-process
    proc = run_script(["--num-envs", "6"], tmp_path, script=SCRIPT, timeout=120)
    expected = ["--num-minibatches 4", "--num-envs 6", "whole env sequences"]
    assert_usage_error(proc, tmp_path, expected)


def play_one_game(agent, seed, carry_state=True):
    """One evaluation game by hand: the state carried from step to step and zeroed after a
    done, as in training; or, with `carry_state=False`, zero at every step."""
    envs = make_env(BREAKOUT, 1, seed)
    stats = EpisodeStatistics(1)
    obs, _ = envs.reset()
    state, done, games = agent.initial_state(1), torch.zeros(1), []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        while not games:
            if not carry_state:
                state = agent.initial_state(1)
            action, *_, state = agent.get_action_and_value(torch.from_numpy(obs), state, done)
            obs, _, terminated, truncated, info = envs.step(action.numpy())
            done = torch.from_numpy(terminated | truncated).float()
            games = stats.update(info, truncated, acted=True)
    envs.close()
    return games[0]


def test_evaluate_carries_the_lstm_state_and_zeroes_it_after_a_done(agent, capsys):
    from cleanrl_utils.evals import evaluate

    agent = copy.deepcopy(
        agent
    )  # an untrained actor is nearly uniform: make it depend on the state
    with torch.no_grad():
        agent.actor.weight.mul_(100.0)
    returns = evaluate(agent, make_env, EpisodeStatistics, BREAKOUT, eval_episodes=1, seed=6)
    printed = re.search(r"episodic_return=([\d.]+), episodic_length=(\d+)", capsys.readouterr().out)
    game = (float(printed[1]), int(printed[2]))
    assert returns == [game[0]]
    assert play_one_game(agent, seed=6) == game
    assert play_one_game(agent, seed=6, carry_state=False) != game  # (the state matters)
