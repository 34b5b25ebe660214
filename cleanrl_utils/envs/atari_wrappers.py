"""The classic DeepMind Atari wrappers that gymnasium does not ship, for the gymnasium scripts
(`cleanrl/ppo_atari.py`, `cleanrl/ppo_atari_lstm.py`): no-op starts, episodic life, FIRE on reset,
the published runs' grayscale conversion, whole-game videos, and the games' scores; and the two
that ALE's own vector env lacks (`cleanrl/ppo_atari_ale_vector.py`): episodic life that keeps the
game going, and frames to watch. As the published CleanRL scripts take theirs from
Stable-Baselines3, ours live here, outside the scripts; each script's `make_env` shows the order
in which they wrap a game. Importing this module registers ALE's games with gymnasium
(`gym.make("BreakoutNoFrameskip-v4")`).
"""

from __future__ import annotations

from pathlib import Path

import ale_py
import cv2  # (gymnasium's ResizeObservation needs it too)
import gymnasium as gym
import numpy as np

from cleanrl_utils.checks.args import NOOP_MAX_LIMIT

gym.register_envs(ale_py)

NOOP, FIRE = 0, 1  # action 0 is NOOP in every game's minimal action set, and in the full one
FRAMES_PER_STEP = 4  # the gymnasium scripts' frame skip (`MaxAndSkipObservation`)


def protocol_settings(
    noop_max=30, episodic_life=True, max_episode_steps=27_000, **make_kwargs
) -> tuple[int, bool, dict]:
    """The protocol's settings (`cleanrl_utils.envs.protocols`; the published ones by default) as the
    gymnasium scripts' `make_env` uses them: `noop_max` for `NoopReset`, `episodic_life` for
    `EpisodicLife`, and gym.make's keyword arguments: the sticky actions and the action set as
    they are (ALE's own names), the time limit in emulator frames (27,000 agent steps: ALE's
    default of 108,000 frames, as in the published runs; ALE's `max_num_frames_per_episode`, when
    given, counts single frames), and anything else given (`render_mode`)."""
    frames = max_episode_steps * FRAMES_PER_STEP
    return noop_max, episodic_life, dict(max_num_frames_per_episode=frames) | make_kwargs


def step_in_reset(env, action):
    """A step that a wrapper's reset takes. If it ends the game (the time limit can), the game is
    reset and the returned info keeps that game's statistics (`info["episode"]`)."""
    obs, _, terminated, truncated, info = env.step(action)
    if terminated or truncated:
        obs, reset_info = env.reset()
        info = {**info, **reset_info}
    return obs, info


class NoopReset(gym.Wrapper):
    """Start each game with 1 to `noop_max` no-op frames, so that games start in different states;
    `noop_max=0`: none (Machado et al.'s protocol, where sticky actions give the randomness)."""

    def __init__(self, env, noop_max=30):
        super().__init__(env)
        # (the scripts' parse refuses more first: a reset is no place for an unbounded loop)
        if not 0 <= noop_max <= NOOP_MAX_LIMIT:
            raise ValueError(f"noop_max must be from 0 to {NOOP_MAX_LIMIT}, got {noop_max}")
        self.noop_max = noop_max

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        noops = self.unwrapped.np_random.integers(1, self.noop_max + 1) if self.noop_max else 0
        for _ in range(noops):
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:  # a game the agent did not play: nothing to report
                obs, info = self.env.reset()
        return obs, info


class EpisodicLife(gym.Wrapper):
    """A lost life ends the training episode (`terminated`) but not the game: the reset that
    follows goes on with the game (one no-op step); only a game over or a truncation resets it."""

    def __init__(self, env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.unwrapped.ale.lives()
        terminated = terminated or 0 < lives < self.lives
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed=None, options=None):
        if self.game_over or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, info = step_in_reset(self.env, NOOP)
        self.game_over = False
        self.lives = self.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE, then action 2, after every reset, also the one after a lost life: games such as
    Breakout wait for FIRE, which a new agent would take long to find."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for action in (FIRE, 2):
            obs, step_info = step_in_reset(self.env, action)
            info = {**info, **step_info}
        return obs, info


class GrayscaleOpenCV(gym.ObservationWrapper):
    """RGB frames to gray with OpenCV (0.299 R + 0.587 G + 0.114 B), as gymnasium 0.29's
    `GrayScaleObservation` did for the published runs: gymnasium 1.x's `GrayscaleObservation`
    weighs the colours differently (on a Breakout frame 16% of the pixels differ, by up to 11)."""

    def __init__(self, env):
        super().__init__(env)
        height, width = env.observation_space.shape[:2]
        self.observation_space = gym.spaces.Box(0, 255, (height, width), np.uint8)

    def observation(self, observation):
        return cv2.cvtColor(observation, cv2.COLOR_RGB2GRAY)


class SeedOnFirstReset(gym.vector.VectorWrapper):
    """A vector env whose first reset seeds its games (env i with seed + i: gymnasium envs take
    their seed at a reset), so that the caller's first `reset()` is the one seeded reset, as with
    EnvPool, whose games are seeded when they are made."""

    def __init__(self, env, seed: int):
        super().__init__(env)
        self.first_seed = seed

    def reset(self, *, seed=None, options=None):
        seed, self.first_seed = (self.first_seed if seed is None else seed), None
        return self.env.reset(seed=seed, options=options)


class RecordGames(gym.Wrapper):
    """Write whole games to `{video_dir}/train-episode-{k}.mp4` (one frame per agent step) for
    games k = 0, 1, 8, 27, ... up to 729, then every 1000th, as gymnasium's RecordVideo does."""

    def __init__(self, env, video_dir):
        super().__init__(env)
        self.video_dir = Path(video_dir)
        self.games = 0
        self.video = None

    def reset(self, **kwargs):
        from cleanrl_utils.envs.video import VideoWriter

        obs, info = self.env.reset(**kwargs)
        if self.video is not None:  # reset before the game ended: not a whole game
            self.video.discard()
            self.video = None
        k = self.games
        if (round(k ** (1 / 3)) ** 3 == k) if k < 1000 else (k % 1000 == 0):
            self.video = VideoWriter(self.video_dir / f"train-episode-{k}.mp4")
            self.video.append(self.env.render())
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.video is not None:
            self.video.append(self.env.render())
        if terminated or truncated:
            self.games += 1
            if self.video is not None:
                self.video.close()
                self.video = None
        return obs, reward, terminated, truncated, info

    def close(self):
        if self.video is not None:
            self.video.discard()
            self.video = None
        super().close()


class EpisodeStatistics:
    """The real game score and length of each env, counted over all lives.

    RecordEpisodeStatistics, the innermost wrapper, sums the raw reward of every frame and reports
    a game in `info["episode"]` when it ends (last life lost, or time limit). Same-step autoreset
    moves that info to `info["final_info"]`; a game that the time limit ends inside the reset
    after a lost life is reported in the reset's info, at the top level. `update` returns the
    (return, length) of each game that ended in this step. The length counts the steps whose
    action reached the game (`acted`, always so with same-step autoreset), as in the EnvPool
    script; `truncations` is unused, truncated games are in `info` too.
    """

    def __init__(self, num_envs):
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def update(self, info, truncations, acted):
        self.lengths += acted
        finished = []
        for source in (info.get("final_info", {}), info):
            for i in np.flatnonzero(source.get("_episode", [])):
                finished.append((float(source["episode"]["r"][i]), int(self.lengths[i])))
                self.lengths[i] = 0
        return finished


def ale_game(env_id: str) -> str:
    """The ROM of an ALE id, spelt as ALE does (`ALE/Breakout-v5`) or as EnvPool does
    (`Breakout-v5`): `breakout`, what `ale_py.vector_env.AtariVectorEnv` takes."""
    return gym.spec("ALE/" + env_id.removeprefix("ALE/")).kwargs["game"]


class VectorEpisodicLife(gym.vector.VectorWrapper):
    """For ALE's vector env, whose own `episodic_life` starts a new game at every lost life: a
    lost life ends the training episode (`terminated`) while the game goes on, and the next step
    presses FIRE in place of the agent's action (NOOP in games without FIRE), as EnvPool's reset
    step and `FireReset` do: games such as Breakout wait for FIRE, which a new agent would take
    long to find. That step, like the one after a game over, is not the agent's. Rewards are
    clipped to their sign; `info["terminated"]` marks the real game over and `info["reward"]`
    keeps the raw score, as EnvPool reports them. With `episodic_life=False` (Machado et al.'s
    protocol) only the rewards and `info` are so: a lost life is not a termination and nothing
    presses FIRE after it (the agent must, as with EnvPool's `episodic_life=False`)."""

    def __init__(self, env, episodic_life: bool = True):
        super().__init__(env)
        self.episodic_life = episodic_life
        action_set = list(env.unwrapped.ale.get_action_set())
        self.fire = action_set.index(ale_py.Action.FIRE) if ale_py.Action.FIRE in action_set else 0

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.lives = info["lives"]
        self.life_lost = np.zeros(self.num_envs, dtype=bool)
        return obs, info

    def step(self, actions):
        actions = np.where(self.life_lost, self.fire, actions)
        obs, reward, terminated, truncated, info = self.env.step(actions)
        # (a new game's lives go up; a life lost at the time limit is a truncation, as in EnvPool)
        self.life_lost = (info["lives"] < self.lives) & ~terminated & ~truncated
        self.life_lost &= self.episodic_life
        self.lives = info["lives"]
        info |= dict(reward=reward, terminated=terminated)
        return obs, np.sign(reward).astype(np.float32), terminated | self.life_lost, truncated, info


class VectorRenderTwin(gym.vector.VectorWrapper):
    """`render()` for ALE's vector env, which has none: a twin of it, made by `make_twin(**kw)`
    with the same game, seeds and settings, steps in lockstep with it (the same actions, resets
    and random numbers: the same games) and keeps each step's last screen in full colour,
    210x160x3, the frame a video shows. Twice the emulation: for evaluations with videos."""

    def __init__(self, env, make_twin):
        super().__init__(env)
        screen = dict(grayscale=False, img_height=210, img_width=160, stack_num=1, maxpool=False)
        self.twin = make_twin(**screen)
        self.screens = None

    def reset(self, **kwargs):
        self.screens = self.twin.reset(**kwargs)[0][:, -1]
        return self.env.reset(**kwargs)

    def step(self, actions):
        self.screens = self.twin.step(actions)[0][:, -1]
        return self.env.step(actions)

    def render(self):
        return self.screens

    def close(self, **kwargs):
        self.twin.close()
        return self.env.close(**kwargs)
