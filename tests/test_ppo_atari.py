"""`cleanrl/ppo_atari.py` on real gymnasium Atari emulators: what a rollout stores across episode
boundaries, how a truncation bootstraps, and the script end to end (the user-known smoke line,
save then evaluate, determinism, async = sync, videos, bad input).

The training runs are started together, once per module, and shared by the tests that read them.
"""

from __future__ import annotations

import json
import re
import types

import numpy as np
import pytest
import torch
from atari_testing import (
    BREAKOUT,
    LEFT,
    RIGHT,
    decoded_frames,
    one_torch_thread,
)
from logs_testing import LOGGED_EVERY_ITERATION, read_scalars
from scripts_testing import (
    REPO_ROOT,
    assert_usage_error,
    describe,
    module_runs,
    run_dirs,
    run_script,
)

from cleanrl.ppo_atari import (
    Agent,
    Args,
    EpisodeStatistics,
    Rollout,
    collect_rollout,
    compute_advantages,
    make_env,
)
from cleanrl_utils.envs.protocols import MACHADO, published
from cleanrl_utils.files.model_file import read_model

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

__all__ = ["one_torch_thread"]  # the module's autouse fixture

SCRIPT = REPO_ROOT / "cleanrl" / "ppo_atari.py"
SMOKE = ["--num-envs", "1", "--num-steps", "64", "--total-timesteps", "256"]
RUNS = {
    # the command users know, as written: 4 iterations of 1 env x 64 steps, seed 1
    "smoke_run": SMOKE,
    # the same run with the envs in a subprocess: same seed, so the same losses
    "async_run": [*SMOKE, "--async-envs"],
    # 256 steps per env: random Breakout games end after 110-300 steps (env 0's first game is
    # recorded); then a saved model and two recorded evaluation games; under Machado et al.'s
    # protocol (sticky actions, 18 actions, no episodic life, no no-op starts)
    "eval_run": [
        *["--num-envs", "2", "--num-steps", "128", "--total-timesteps", "512"],
        *["--update-epochs", "1", "--save-model", "--capture-video", "--eval-episodes", "2"],
        *["--protocol", "machado"],
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
def async_run(runs):
    return runs["async_run"]


@pytest.fixture(scope="module")
def eval_run(runs):
    return runs["eval_run"]


def fresh_stack(obs: torch.Tensor) -> bool:
    return all(torch.equal(frame, obs[0]) for frame in obs)


def test_rollout_stores_real_transitions_across_life_loss_truncation_and_game_over():
    # seed 3, a 900-frame limit: the first game is cut by the time limit after 4 lost lives,
    # the second ends by game over (4 lost lives, then the last)
    torch.manual_seed(3)
    envs = make_env(BREAKOUT, 1, seed=3, max_num_frames_per_episode=900)
    agent = Agent(envs)
    rollout = Rollout.zeros(Args(num_steps=320, num_envs=1), (4, 84, 84), "cpu")
    obs, _ = envs.reset()
    _, finished = collect_rollout(
        agent.get_action_and_value,
        agent.get_value,
        envs,
        rollout,
        torch.from_numpy(obs),
        EpisodeStatistics(1),
    )
    envs.close()
    term, trunc = rollout.terminations[:, 0].bool(), rollout.truncations[:, 0].bool()
    assert len(finished) == 2 and int(trunc.sum()) == 1, (finished, trunc.nonzero())
    (cut, cut_return, cut_length), (over, over_return, over_length) = finished

    # the time limit: truncated, not terminated; the game reported once, with its length
    assert trunc[cut] and not term[cut]
    assert cut_length == cut + 1
    assert cut_return >= rollout.rewards[: cut + 1].sum()  # the real score, over all lives
    # it bootstraps from its last observation's value, stored apart; no other step has one
    assert rollout.final_values[cut, 0] != 0
    assert int((rollout.final_values != 0).sum()) == 1

    # lost lives end training episodes (terminated) without a game report
    losses_second_game = [int(s) for s in term.nonzero() if cut < s < over]
    assert len(losses_second_game) == 4
    assert term[over] and not trunc[over]
    assert over_length == over - cut
    assert over_return >= rollout.rewards[cut + 1 : over + 1].sum()

    # every stored transition is real: after a done the next observation starts a new episode
    # (a fresh stack), and otherwise the stack just shifts by one frame
    for step in range(over):
        if term[step] or trunc[step]:
            assert fresh_stack(rollout.obs[step + 1, 0]), step
        else:
            assert torch.equal(rollout.obs[step + 1, 0, :3], rollout.obs[step, 0, 1:]), step


@pytest.mark.parametrize("boundary", ["life loss", "time limit", "game over"])
def test_the_action_right_after_a_boundary_reaches_the_game(boundary):
    """Two identical envs, identical actions up to the boundary, then LEFT in one and RIGHT in
    the other: with same-step autoreset they diverge at once (no step ignores its action)."""
    limit = {"max_num_frames_per_episode": 300} if boundary == "time limit" else {}
    a, b = make_env(BREAKOUT, 1, seed=1, **limit), make_env(BREAKOUT, 1, seed=1, **limit)
    a.reset(), b.reset()
    rng = np.random.default_rng(1)
    for _ in range(500):
        action = rng.integers(4, size=1)
        obs_a, _, terminated, truncated, info = a.step(action)
        obs_b, *_ = b.step(action)
        np.testing.assert_array_equal(obs_a, obs_b)
        game_over = "final_info" in info and info["final_info"]["lives"][0] == 0
        reached = {"life loss": terminated[0], "time limit": truncated[0], "game over": game_over}
        if reached[boundary] and (boundary != "life loss" or not game_over):
            break
    else:
        raise AssertionError(f"no {boundary} within 500 steps")
    (obs_a, *_), (obs_b, *_) = a.step(np.array([LEFT])), b.step(np.array([RIGHT]))
    assert not np.array_equal(obs_a, obs_b)
    a.close(), b.close()


def test_a_game_the_time_limit_ends_inside_the_reset_after_a_lost_life_is_reported_once():
    rng = np.random.default_rng(2)
    actions = rng.integers(4, size=(200, 1))
    envs = make_env(BREAKOUT, 1, seed=2)
    envs.reset()
    for loss_step, action in enumerate(actions):
        _, _, terminated, _, _ = envs.step(action)
        if terminated[0]:
            break
    # the reset after the lost life took a no-op, FIRE and action 2: 12 frames; cut in FIRE's
    limit = envs.unwrapped.envs[0].unwrapped.ale.getEpisodeFrameNumber() - 6
    envs.close()

    envs = make_env(BREAKOUT, 1, seed=2, max_num_frames_per_episode=limit)
    obs, _ = envs.reset()
    stats, reported = EpisodeStatistics(1), []
    for step, action in enumerate(actions[: loss_step + 10]):
        obs, _, terminated, truncated, info = envs.step(action)
        assert terminated[0] == (step == loss_step) and not truncated[0]
        reported += [(step, *game) for game in stats.update(info, truncated, acted=True)]
        if step == loss_step:
            assert "episode" not in info["final_info"]  # the life loss did not end the game...
            assert fresh_stack(torch.from_numpy(obs[0]))
    envs.close()
    assert [(step, length) for step, _, length in reported] == [(loss_step, loss_step + 1)]


def test_truncation_bootstraps_from_the_final_value_and_termination_does_not():
    values = torch.tensor([[1.0], [2.0], [3.0]])
    next_value = torch.tensor([4.0])
    rewards = torch.tensor([[0.0], [1.0], [0.0]])
    final_values = torch.tensor([[0.0], [10.0], [0.0]])  # step 1's episode ends in a value of 10
    no_flag, flag_at_1 = torch.zeros(3, 1), torch.tensor([[0.0], [1.0], [0.0]])

    def returns(terminations, truncations):
        rollout = types.SimpleNamespace(
            rewards=rewards,
            values=values,
            terminations=terminations,
            truncations=truncations,
            final_values=final_values,
        )
        _, ret = compute_advantages(rollout, next_value, 0.5, 1.0)
        return ret.flatten().tolist()

    # truncated at step 1: bootstrap from the final value (10), not from the next episode's
    # first value (3); step 0 chains into step 1; step 2 bootstraps from next_value
    assert returns(no_flag, flag_at_1) == [0 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10, 0 + 0.5 * 4]
    # terminated at step 1 (also when the time limit falls on the same step): no future
    assert returns(flag_at_1, no_flag) == [0.5, 1.0, 2.0]
    assert returns(flag_at_1, flag_at_1) == [0.5, 1.0, 2.0]
    # no boundary: step 1 chains into step 2
    assert returns(no_flag, no_flag) == [0.5 * (1 + 0.5 * 2), 1 + 0.5 * 2, 2.0]


@pytest.mark.slow
def test_user_known_smoke_command_runs(smoke_run):
    run = smoke_run.ok()
    assert re.fullmatch(r"BreakoutNoFrameskip-v4__ppo_atari__1__\d+", run.run_dir.name)
    assert not (run.cwd / "videos").exists()
    config = json.loads((run.run_dir / "config.json").read_text())
    assert config["command"][1:] == SMOKE
    assert config["args"]["batch_size"] == 64 and config["args"]["num_iterations"] == 4
    assert config["args"]["async_envs"] is False
    # the published runs' protocol, ALE's time limit of 108,000 frames; what ran it
    assert config["protocol"] == {"name": "published", **published("ppo_atari")}
    assert config["protocol"]["max_episode_steps"] == 27_000
    assert config["device"]["type"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert {"torch", "gymnasium", "ale-py", "numpy"} <= set(config["packages"])
    scalars = read_scalars(run.run_dir)
    for tag in LOGGED_EVERY_ITERATION:
        assert [step for step, _ in scalars.get(tag, [])] == [64, 128, 192, 256], tag
    assert scalars["charts/learning_rate"][0][1] == pytest.approx(2.5e-4)
    assert re.search(r"^step 256/256 \(100\.0%\) SPS=\d+", run.proc.stderr, re.M)


@pytest.mark.slow
def test_same_seed_gives_identical_losses_with_sync_and_async_envs(smoke_run, async_run):
    sync, async_ = read_scalars(smoke_run.ok().run_dir), read_scalars(async_run.ok().run_dir)
    losses = [tag for tag in LOGGED_EVERY_ITERATION if tag.startswith("losses/")]
    for tag in losses:
        assert sync[tag] == async_[tag], tag


@pytest.mark.slow
def test_save_model_then_evaluate_gives_the_same_games(eval_run):
    run = eval_run.ok()
    scalars = read_scalars(run.run_dir)
    returns = [value for _, value in scalars.get("charts/episodic_return", [])]
    lengths = [value for _, value in scalars.get("charts/episodic_length", [])]
    assert returns and all(r >= 0 and r.is_integer() for r in returns), returns
    assert all(100 < n < 300 for n in lengths), lengths  # agent steps of random games
    model = run.run_dir / "ppo_atari.cleanrl_model"
    assert model.is_file()
    assert f"model saved to runs/{run.run_dir.name}/ppo_atari.cleanrl_model" in run.proc.stdout
    in_process = [value for _, value in scalars["eval/episodic_return"]]
    assert len(in_process) == 2
    assert {step for step, _ in scalars["eval/episodic_return"]} == {512}  # the run's last step
    machado = {"name": "machado", **MACHADO}
    assert json.loads((run.run_dir / "config.json").read_text())["protocol"] == machado
    assert read_model(model).protocol == machado

    # the saved model, evaluated by default on the seed and under the protocol of the run's own
    # evaluation (seed + 1, the protocol it was trained with): the same games
    args = ["--model-path", model.relative_to(run.cwd), "--eval-episodes", "2"]
    proc = run_script(args, run.cwd, module="cleanrl_utils.evals")
    assert proc.returncode == 0, describe(proc)
    said = "games with seed 2 (the run's own evaluation's), under the machado protocol"
    assert said in proc.stdout and "(the one it was trained with)" in proc.stdout, proc.stdout
    printed = re.findall(r"^eval_episode=\d+, episodic_return=([\d.]+)", proc.stdout, re.M)
    assert [float(r) for r in printed] == in_process
    assert run_dirs(run.cwd) == [run.run_dir]


@pytest.mark.slow
def test_capture_video_records_env_0_games_and_evaluation_games(eval_run):
    run = eval_run.ok()
    video_dir = run.cwd / "videos" / run.run_dir.name
    videos = sorted(p.name for p in video_dir.iterdir())
    assert {"train-episode-0.mp4", "eval-episode-0.mp4", "eval-episode-1.mp4"} <= set(videos)
    assert set(videos) <= {"train-episode-0.mp4", "train-episode-1.mp4"} | {
        "eval-episode-0.mp4",
        "eval-episode-1.mp4",
    }, videos  # only whole games: no unfinished game, no temporary file
    trained = sum(name.startswith("train-") for name in videos)
    said = f"videos: videos/{run.run_dir.name}/ (2 evaluation games: eval-episode-N.mp4, "
    said += f"{trained} training game{'s' if trained > 1 else ''}: train-episode-N.mp4)"
    assert said in run.proc.stdout.splitlines(), run.proc.stdout
    for name in ("train-episode-0.mp4", "eval-episode-0.mp4"):
        frames = decoded_frames(video_dir / name)
        assert {frame.shape for frame in frames} == {(210, 160, 3)}
        assert len(frames) > 100  # a whole game, one frame per agent step


@pytest.mark.slow
def test_bad_input_fails_fast(tmp_path):
    # the script as a process: exit code 2 and one error line before any folder is made; the
    # whole table of bad input (env ids, batch arithmetic) is in test_checks.py, in-process
    args = [*SMOKE, "--num-minibatches", "3"]
    proc = run_script(args, tmp_path, script=SCRIPT, timeout=120)
    assert_usage_error(proc, tmp_path, ["--num-minibatches 3", "64"])
