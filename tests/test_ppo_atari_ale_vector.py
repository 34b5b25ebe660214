"""`cleanrl/ppo_atari_ale_vector.py` on ALE's own vector env (ale-py 0.12), real emulators:
what its episode boundaries give the loss and the score, its videos, and the same games played
by EnvPool. The run's lifecycle with this script (Ctrl-C, `--resume auto`, save, evaluate,
`enjoy`) is the end-to-end test at the bottom.

What ALE's vector env does, asserted below (`AtariVectorEnv(game, n, episodic_life=False,
reward_clipping=False, repeat_action_probability=0)`, next-step autoreset), and what the
script's `atari_wrappers.VectorEpisodicLife` makes of it:

- a lost life: `lives` one lower, no flag from ALE; the wrapper says `terminated` (the training
  episode ends), and the next step presses FIRE in place of the agent's action (NOOP in a game
  without FIRE): the game goes on, and that step, as EnvPool's reset step, is not the agent's;
- a game over: ALE's `terminated`; the wrapper's `info["terminated"]`; the next step is a reset
  step (action ignored, reward 0, a new game with full lives);
- the time limit: `truncated` after `max_episode_steps * 4` frames of play, the step the
  EnvPool script truncates at; the next step is a reset step;
- the reward: ALE's raw score in `info["reward"]`, its sign as the reward.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import types

import cv2
import envpool
import numpy as np
import pytest
import torch
from logs_testing import read_scalars
from scripts_testing import (
    REPO_ROOT,
    describe,
    finish_script,
    run_dirs,
    run_script,
    script_env,
    start_script,
)

from cleanrl_utils.console.errors import INTERRUPTED
from cleanrl_utils.evals import evaluate
from cleanrl_utils.files.scripts import load_script

script = load_script("ppo_atari_ale_vector")
envpool_script = load_script("ppo_atari_envpool")
SCRIPT = REPO_ROOT / "cleanrl" / "ppo_atari_ale_vector.py"


class RawSteps:
    """Stands between ALE's vector env and the script's wrapper and keeps what ALE returned:
    the actions it was given and the raw rewards, flags and lives of every step, and those of the
    reset."""

    def __init__(self, envs):
        self.inner, self.steps, self.actions = envs.env, [], []
        envs.env = self  # (VectorEpisodicLife steps this instead of ALE's env)

    def reset(self, **kwargs):
        obs, info = self.inner.reset(**kwargs)
        self.reset_lives = info["lives"].copy()
        return obs, info

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.inner.step(actions)
        self.actions.append(np.array(actions))
        self.steps.append(
            (reward.copy(), terminated.copy(), truncated.copy(), info["lives"].copy())
        )
        return obs, reward, terminated, truncated, info

    def __getattr__(self, name):
        return getattr(self.inner, name)


def random_policy(num_actions, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def policy(obs):
        action = torch.randint(num_actions, (obs.shape[0],), generator=generator)
        return action, torch.zeros(obs.shape[0]), None, torch.zeros(obs.shape[0], 1)

    return policy


def test_the_algorithm_is_the_envpool_scripts_line_for_line():
    """Only the env differs: GAE, the loss, the update, the network and the storage are the
    EnvPool script's, so its tests of them (test_gae.py, test_ppo_loss.py) hold here too."""
    import inspect

    for name in ["compute_advantages", "masked_mean", "ppo_loss", "update", "Agent", "Rollout"]:
        ours, theirs = getattr(script, name), getattr(envpool_script, name)
        strip = re.compile(r"#.*|(?s:\"\"\".*?\"\"\")")  # comments and docstrings may differ
        assert strip.sub("", inspect.getsource(ours)) == strip.sub("", inspect.getsource(theirs))
    assert (
        script.Args.__dataclass_fields__.keys() == envpool_script.Args.__dataclass_fields__.keys()
    )


def test_the_loss_sees_clipped_rewards_and_lost_lives_and_the_score_is_the_whole_game():
    """SpaceInvaders (an invader is worth 5 to 30 points, 3 lives), 2 envs x 800 steps with a
    time limit of 400 steps: lost lives, game overs and truncations all happen. The rollout the
    loss reads holds sign(raw reward), `terminated` at every lost life and game over (never at
    a truncation without one), `truncated` at the time limit, and `valids` false on exactly the
    steps that are not the agent's: the reset steps (after a game over or a truncation) and the
    steps after a lost life, where FIRE is pressed in place of the agent's action. Each logged
    game is the raw sum over all its lives, its length the agent's steps in it."""
    num_envs, num_steps = 2, 800
    envs = script.make_env("SpaceInvaders-v5", num_envs, 1, max_episode_steps=400)
    raw = RawSteps(envs)
    args = types.SimpleNamespace(num_envs=num_envs, num_steps=num_steps)
    rollout = script.Rollout.zeros(args, envs.single_observation_space.shape, "cpu")
    next_obs = torch.from_numpy(envs.reset()[0])
    lives_before = raw.reset_lives
    next_valid = np.ones(num_envs, dtype=bool)
    stats = script.EpisodeStatistics(num_envs)
    policy = random_policy(envs.single_action_space.n)
    _, _, finished = script.collect_rollout(policy, envs, rollout, next_obs, next_valid, stats)
    envs.close()

    reward, game_over, truncated, lives = (np.stack(x) for x in zip(*raw.steps))
    lost_life = lives < np.concatenate([lives_before[None], lives[:-1]])
    assert np.array_equal(rollout.rewards.numpy(), np.sign(reward))
    assert np.array_equal(rollout.terminations.numpy().astype(bool), game_over | lost_life)
    assert np.array_equal(rollout.truncations.numpy().astype(bool), truncated)
    after = lambda x: np.concatenate([np.zeros((1, num_envs), bool), x[:-1]])  # noqa: E731
    reset_step = after(game_over | truncated)
    after_lost_life = after(lost_life & ~game_over & ~truncated)
    assert np.array_equal(rollout.valids.numpy().astype(bool), ~(reset_step | after_lost_life))
    assert (reward[reset_step] == 0).all()
    actions, fire = np.stack(raw.actions), envs.fire
    assert after_lost_life.any() and (actions[after_lost_life] == fire).all()
    assert fire == 1 and (actions[~after_lost_life] != fire).any()  # (SpaceInvaders' FIRE)
    assert (truncated & ~lost_life).any() and not rollout.terminations.numpy()[truncated].any()

    # each game: the raw rewards of all its lives, the steps that reached it
    expected, later_lives_scored = [], False
    for i in range(num_envs):
        score = length = first_life = 0
        lives_lost = 0
        for t in range(num_steps):
            agents = not (reset_step[t, i] or after_lost_life[t, i])
            score, length = score + reward[t, i], length + agents
            first_life += reward[t, i] if lives_lost == 0 else 0
            lives_lost += lost_life[t, i]
            if game_over[t, i] or truncated[t, i]:
                expected.append((t, float(score), length))
                later_lives_scored |= score > first_life
                score = length = first_life = lives_lost = 0
    assert sorted(finished) == sorted(expected)
    assert later_lives_scored  # a game's score counts the lives after the first
    assert (reward > 1).any()  # the raw score, not the clipped one


def test_a_truncation_at_the_time_limit_bootstraps():
    """GAE from the rollout of a truncated game: the truncated step's target bootstraps from
    the value of its last observation (stored as the next step's), a lost life's does not."""
    rewards = torch.tensor([[1.0], [0.0], [0.0], [0.0]])
    values = torch.tensor([[0.5], [2.0], [3.0], [4.0]])
    zeros = torch.zeros(4, 1)
    truncated = torch.tensor([[0.0], [1.0], [0.0], [0.0]])
    rollout = types.SimpleNamespace(
        rewards=rewards, values=values, terminations=zeros, truncations=truncated
    )
    advantages, _ = script.compute_advantages(rollout, torch.tensor([5.0]), 0.99, 0.95)
    assert advantages[1, 0] == torch.tensor(0.99 * 3.0 - 2.0)  # bootstrapped, then cut
    terminated = types.SimpleNamespace(**vars(rollout) | dict(terminations=truncated))
    advantages, _ = script.compute_advantages(terminated, torch.tensor([5.0]), 0.99, 0.95)
    assert advantages[1, 0] == torch.tensor(-2.0)


def test_videos_show_the_games_the_agent_plays_in_full_colour():
    """ALE's vector env has no `render()`: with `render_mode="rgb_array"` (what the evaluator
    passes) a full-colour twin steps in lockstep. Its frames are 210x160 RGB, the same game as
    the agent's observations (grey and resized: within half a grey level on average; the
    observation max-pools two frames), and the
    twin changes nothing of what the agent sees: the same observations, rewards and lives as
    an env without it, over whole games (resets included)."""
    plain = script.make_env("Breakout-v5", 1, 5, max_episode_steps=300)
    shown = script.make_env("Breakout-v5", 1, 5, max_episode_steps=300, render_mode="rgb_array")
    obs_a, obs_b = plain.reset()[0], shown.reset()[0]
    rng = np.random.default_rng(0)
    games = 0
    for _ in range(700):
        assert np.array_equal(obs_a, obs_b)
        screen = shown.render()
        assert screen.shape == (1, 210, 160, 3) and screen.dtype == np.uint8
        assert (screen[0, ..., 0] != screen[0, ..., 2]).any()  # colour, not grey
        grey = cv2.cvtColor(screen[0], cv2.COLOR_RGB2GRAY)
        grey = cv2.resize(grey, (84, 84), interpolation=cv2.INTER_AREA)
        assert np.abs(grey.astype(int) - obs_b[0, -1]).mean() < 0.5  # (measured: at most 0.36)
        action = rng.integers(0, 4, 1)
        a, b = plain.step(action), shown.step(action)
        obs_a, obs_b = a[0], b[0]
        for x, y in zip(a[1:4], b[1:4]):
            assert np.array_equal(x, y)
        assert np.array_equal(a[4]["lives"], b[4]["lives"])
        games += int(b[4]["terminated"][0] or b[3][0])
    assert games >= 2
    plain.close()
    shown.close()


def test_the_evaluator_counts_the_agents_steps(capsys):
    """One game of Breakout (5 lives) from the start: the evaluator's game length is every step
    the agent took but the 4 after a lost life, where FIRE is pressed for it (as EnvPool's
    reset steps, which its evaluations do not count either)."""
    calls = []

    class RandomAgent:
        def get_action_and_value(self, obs):
            calls.append(1)
            return (torch.randint(4, (obs.shape[0],)),)

    scores = evaluate(
        RandomAgent(), script.make_env, script.EpisodeStatistics, "Breakout-v5", eval_episodes=1
    )
    (length,) = map(int, re.findall(r"episodic_length=(\d+)", capsys.readouterr().out))
    assert len(scores) == 1 and length == len(calls) - 4 > 100


def test_envpool_and_ale_play_the_same_game():
    """Breakout, 2 envs, 1,500 random actions, the same in both, with a time limit of 150
    steps: EnvPool (`noop_max=1`: no no-ops, then FIRE for one frame) and ALE's vector env
    (`noop_max=0`), both without sticky actions, episodic life or reward clipping. Rewards,
    flags and lives are equal at every step (game overs and truncations included: ALE's limit
    of 600 frames is EnvPool's of 150 steps); so is the newest frame, but on the step that
    ends a game (the last life lost, or the time limit), where up to 1% of the pixels differ,
    around the ball and the paddle (both played the step's 4 frames: they build a game's last
    observation differently). A new game's frame stack: EnvPool repeats its first frame, ALE
    pads it with black frames."""
    num_envs, steps = 2, 1500
    ep = envpool.make_gym(
        "Breakout-v5",
        num_envs=num_envs,
        seed=0,
        noop_max=1,
        episodic_life=False,
        reward_clip=False,
        repeat_action_probability=0.0,
        max_episode_steps=150,
    )
    ale = script.AtariVectorEnv(
        "breakout",
        num_envs,
        noop_max=0,
        reward_clipping=False,
        repeat_action_probability=0.0,
        max_num_frames_per_episode=150 * 4,
    )

    def check_new_games(obs_e, obs_a, new_game):
        for i in np.flatnonzero(new_game):
            assert np.array_equal(obs_e[i, -1], obs_a[i, -1])
            assert all(np.array_equal(obs_e[i, k], obs_e[i, -1]) for k in range(3))
            assert not obs_a[i, :3].any()

    check_new_games(ep.reset()[0], ale.reset(seed=0)[0], np.ones(num_envs, bool))
    new_game = np.zeros(num_envs, bool)  # (next step: a reset step, a new game's first frame)
    rng = np.random.default_rng(0)
    counts = dict(game_over=0, truncated=0)
    for _ in range(steps):
        action = rng.integers(0, 4, num_envs)
        obs_e, r_e, term_e, trunc_e, info_e = ep.step(action)
        obs_a, r_a, term_a, trunc_a, info_a = ale.step(action)
        check_new_games(obs_e, obs_a, new_game)
        assert np.array_equal(r_e, r_a) and np.array_equal(info_e["lives"], info_a["lives"])
        assert np.array_equal(term_e, term_a) and np.array_equal(trunc_e, trunc_a)
        for i in range(num_envs):
            differ = (obs_e[i, -1] != obs_a[i, -1]).mean()
            if term_e[i] or trunc_e[i]:
                assert differ <= 0.01  # (measured: at most 63 of 7,056 pixels, 0.9%)
            else:
                assert differ == 0
        counts["game_over"] += term_e.sum()
        counts["truncated"] += trunc_e.sum()
        new_game = term_e | trunc_e
    assert counts["game_over"] >= 4 and counts["truncated"] >= 4, counts
    ep.close()
    ale.close()


def test_after_a_lost_life_both_press_fire_in_place_of_the_agents_action():
    """The scripts' own envs (no-ops made equal): the same game until the first lost life;
    then the next step ignores the agent's action in both: EnvPool's is a reset step (one frame
    of FIRE, reward 0, `elapsed_step` unchanged), ALE's wrapper presses FIRE for the step's 4
    frames. Both games go on with the lives they had."""
    ep = envpool_script.make_env("Breakout-v5", 1, 3, noop_max=1)
    ale = script.make_env("Breakout-v5", 1, 3, noop_max=0)
    raw = RawSteps(ale)
    obs_e, obs_a = ep.reset()[0], ale.reset()[0]
    assert np.array_equal(obs_e[0, -1], obs_a[0, -1])
    rng = np.random.default_rng(0)
    for _ in range(500):
        action = rng.integers(0, 4, 1)
        obs_e, r_e, term_e, _, info_e = ep.step(action)
        obs_a, r_a, term_a, _, info_a = ale.step(action)
        assert np.array_equal(obs_e[0, -1], obs_a[0, -1]) and r_e == r_a and term_e == term_a
        if term_e[0]:
            break
    assert term_e[0] and info_e["lives"][0] == info_a["lives"][0] == 4  # the first lost life
    frame, elapsed = info_a["episode_frame_number"][0], info_e["elapsed_step"][0]
    obs_e, r_e, term_e, _, info_e = ep.step(np.array([3]))  # LEFT: ignored by both
    obs_a, r_a, term_a, _, info_a = ale.step(np.array([3]))
    assert info_e["elapsed_step"][0] == elapsed and info_a["episode_frame_number"][0] == frame + 4
    assert raw.actions[-1][0] == ale.fire == 1
    assert r_e[0] == r_a[0] == 0 and not term_e[0] and not term_a[0]
    assert info_e["lives"][0] == info_a["lives"][0] == 4
    ep.close()
    ale.close()


@pytest.mark.slow
def test_ctrl_c_then_resume_auto_then_save_evaluate_record_and_replay(tmp_path):
    """The lifecycle with ALE's spelling of the id, `ALE/Breakout-v5` (the run folder is
    `ALE+Breakout-v5__...`): Ctrl-C after the first iteration (exit code 130, a checkpoint);
    `--resume auto` finds the run by the id as given and finishes it, tracked with W&B
    (offline), saves the model, plays an evaluation game and records it in full colour; the
    evaluator (given the run folder) and `enjoy` (given the model file) play it again; the
    Hub repository folder of the run is built (`--dry-run` of the push)."""
    tiny = [
        "--num-envs",
        "2",
        "--num-steps",
        "16",
        "--num-minibatches",
        "1",
        "--update-epochs",
        "1",
    ]
    flags = ["--env-id", "ALE/Breakout-v5", *tiny, "--total-timesteps", str(32 * 40)]
    proc = start_script([*flags, "--checkpoint-every", "0"], tmp_path, script=SCRIPT)
    deadline = time.time() + 300
    while b"step " not in os.pread(proc.output_files[1].fileno(), 1 << 16, 0):
        assert proc.poll() is None, describe(finish_script(proc))
        assert time.time() < deadline, "no iteration done after 300 s"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stopped = finish_script(proc, timeout=120)
    assert stopped.returncode == INTERRUPTED, describe(stopped)
    (run_dir,) = run_dirs(tmp_path)
    assert re.fullmatch(r"ALE\+Breakout-v5__ppo_atari_ale_vector__1__\d+", run_dir.name)
    config = json.loads((run_dir / "config.json").read_text())
    assert config["args"]["env_id"] == "ALE/Breakout-v5"
    assert list(run_dir.glob("checkpoint_*.ckpt")) and not (tmp_path / "videos").exists()

    # (what happens after training is chosen anew by the resuming command)
    after = ["--save-model", "--capture-video", "--eval-episodes", "1", "--track"]
    resume = ["--resume", "auto", "--env-id", "ALE/Breakout-v5", *after]
    resumed = run_script(resume, tmp_path, script=SCRIPT)
    assert resumed.returncode == 0, describe(resumed)
    assert f"--resume auto: the newest unfinished run is {run_dir.name}" in resumed.stderr
    assert run_dirs(tmp_path) == [run_dir]
    steps = [step for step, _ in read_scalars(run_dir, files=None)["losses/value_loss"]]
    assert steps[-1] == 32 * 40
    assert len(read_scalars(run_dir, files=None)["eval/episodic_return"]) == 1
    assert list((tmp_path / "wandb").glob("offline-run-*"))

    import imageio

    video = tmp_path / "videos" / run_dir.name / "eval-episode-0.mp4"
    reader = imageio.get_reader(video, format="ffmpeg")
    try:
        shapes, colour = set(), False
        for n, frame in enumerate(reader, 1):
            shapes.add(frame.shape)
            colour |= np.abs(frame[..., 0].astype(int) - frame[..., 2]).max() > 50
    finally:
        reader.close()
    assert n > 100 and shapes == {(210, 160, 3)} and colour

    folder = f"runs/{run_dir.name}"
    for module, model in [
        ("cleanrl_utils.evals", folder),
        ("cleanrl_utils.enjoy", f"{folder}/ppo_atari_ale_vector.cleanrl_model"),
    ]:
        args = ["--model-path", model, "--eval-episodes", "1"]
        played = run_script(args, tmp_path, module=module)
        assert played.returncode == 0, describe(played)
        assert "ppo_atari_ale_vector on ALE/Breakout-v5" in played.stdout
        assert re.search(r"^eval_episode=0, episodic_return=\d", played.stdout, re.M)

    # what --upload-model would push (the push itself is the script's no more: test_huggingface)
    repo = tmp_path / "repo"
    flags = [folder, "--dry-run", "--output-dir", repo, "--hf-entity", "someone"]
    built = run_script(flags, tmp_path, module="cleanrl_utils.huggingface")
    assert built.returncode == 0, describe(built)
    assert (repo / "replay.mp4").read_bytes() == (
        repo / "videos" / "eval-episode-0.mp4"
    ).read_bytes()
    card = (repo / "README.md").read_text()
    assert "--hf-repo someone/ALE-Breakout-v5-ppo_atari_ale_vector-seed1" in card
    assert "ale-py==" in (repo / "requirements.txt").read_text()


@pytest.mark.slow
def test_a_fresh_environment_with_only_the_atari_extra_trains_saves_and_evaluates(tmp_path):
    """The README's install of this script, `pip install -r requirements/requirements-atari.txt
    -e ".[atari]"`, in a new virtual environment: neither EnvPool nor JAX is there, and the
    script trains (a checkpoint each iteration), saves its model and plays an evaluation game;
    the evaluator, a process of its own, plays the saved model. (Resuming is the lifecycle
    test's above: nothing of it is the extra's.)"""
    venv = tmp_path / "venv"
    python = str(venv / "bin" / "python")
    # the venv without a pip of its own (copying one in costs a few CPU-seconds): the tests' pip
    # installs into it (--python); --no-compile: no bytecode for every installed file, half of
    # pip's CPU time here (the first process to import a module writes its bytecode, as every
    # process of the session does: tests/conftest.py)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile"]
    pip += ["-r", "requirements/requirements-atari.txt"]
    installed = subprocess.run(
        [*pip, "-e", ".[atari]"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=900
    )
    assert installed.returncode == 0, installed.stderr[-4000:]
    env = script_env(tmp_path, PYTHONPATH="")  # (nothing of the test's environment)
    absent = "import importlib.util as u; print([m for m in ('envpool', 'jax') if u.find_spec(m)])"
    found = subprocess.run([python, "-c", absent], env=env, capture_output=True, text=True)
    assert found.stdout.strip() == "[]", found.stdout + found.stderr

    def run(*args, **kw):
        proc = subprocess.run(
            [python, *map(str, args)], cwd=tmp_path, env=env, capture_output=True, text=True, **kw
        )
        assert proc.returncode == 0, describe(proc)
        return proc

    tiny = ["--num-envs", "2", "--num-steps", "8", "--num-minibatches", "1", "--update-epochs", "1"]
    after = ["--save-model", "--eval-episodes", "1"]
    trained = run(
        SCRIPT, *tiny, "--total-timesteps", "32", "--checkpoint-every", "1", *after, timeout=300
    )
    assert "eval_episode=0" in trained.stdout
    (run_dir,) = run_dirs(tmp_path)
    assert (run_dir / "checkpoint_0000001.ckpt").is_file()
    assert (run_dir / "ppo_atari_ale_vector.cleanrl_model").is_file()
    played = run("-m", "cleanrl_utils.evals", "--model-path", run_dir, "--eval-episodes", "1")
    assert "mean episodic_return=" in played.stdout
