# docs and experiment results: docs/ppo_atari.md
import os
import random
import time
from collections import deque
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import ale_py
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.distributions.categorical import Categorical

from cleanrl_utils.checkpoint import Checkpoints
from cleanrl_utils.checks import check_env_id, check_ppo_args
from cleanrl_utils.progress import Progress
from cleanrl_utils.runs import start_run

gym.register_envs(ale_py)


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be enabled by default"""
    compile: bool = False
    """compile the policy, GAE and the PPO loss with `torch.compile` (in the first iteration); meant for GPUs: on a 2-core CPU it was not clearly faster (docs/throughput.md)"""
    cudagraphs: bool = False
    """also replay the rollout's forward passes as CUDA graphs (torch.compile's `reduce-overhead` mode; implies --compile); needs a GPU"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanRL"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to record env 0's games and the evaluation games (under `videos/{run_name}/`)"""
    save_model: bool = False
    """whether to save the model into `runs/{run_name}/{exp_name}.cleanrl_model` and evaluate it"""
    eval_episodes: int = 10
    """the number of games to play when evaluating the final model"""
    checkpoint_every: int = 100
    """write a checkpoint into the run folder every this many iterations (also after the last one and on SIGTERM/SIGUSR1); 0: only then"""
    resume: str | None = None
    """continue a killed run from its newest checkpoint: its run folder, a checkpoint file, or `auto` (the newest run of this exp_name, env_id and seed)"""

    # Algorithm specific arguments
    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of the environment (a gymnasium Atari id without frame skip)"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_envs: int = 8
    """the number of parallel game environments"""
    async_envs: bool = False
    """if toggled, the envs run in subprocesses (gymnasium's AsyncVectorEnv), else one after another"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.1
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.01
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def make_env(env_id, num_envs, seed, async_envs=False, video_dir=None, **kwargs):
    """`num_envs` games with the classic DeepMind preprocessing, in a gymnasium vector env that
    resets an env in the same step that ends its episode (`AutoresetMode.SAME_STEP`): every step's
    action reaches the game, and an ended episode's last observation is in `info["final_obs"]`.
    Env i is seeded with seed + i. With `video_dir`, env 0 records its games. `kwargs` go to
    `gym.make` (`render_mode`, `max_num_frames_per_episode`: 108,000 frames by default)."""

    def thunk(idx):
        record = video_dir is not None and idx == 0
        env = gym.make(env_id, **({"render_mode": "rgb_array"} | kwargs if record else kwargs))
        env = gym.wrappers.RecordEpisodeStatistics(env)  # sees every frame: the real game score
        env = NoopReset(env, noop_max=30)
        env = gym.wrappers.MaxAndSkipObservation(env, skip=4)
        if record:
            env = RecordGames(env, video_dir)
        env = EpisodicLife(env)
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireReset(env)
        env = gym.wrappers.TransformReward(env, np.sign)
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        env = gym.wrappers.GrayscaleObservation(env)
        env = gym.wrappers.FrameStackObservation(env, 4)
        return env

    vector_env = gym.vector.AsyncVectorEnv if async_envs else gym.vector.SyncVectorEnv
    envs = vector_env(
        [partial(thunk, idx) for idx in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    envs.reset(seed=seed)  # seeds the emulators and no-op starts; the caller's reset starts play
    return envs


NOOP, FIRE = 0, 1  # action 0 is NOOP in every game's minimal action set


def step_in_reset(env, action):
    """A step that a wrapper's reset takes. If it ends the game (the time limit can), the game is
    reset and the returned info keeps that game's statistics (`info["episode"]`)."""
    obs, _, terminated, truncated, info = env.step(action)
    if terminated or truncated:
        obs, reset_info = env.reset()
        info = {**info, **reset_info}
    return obs, info


class NoopReset(gym.Wrapper):
    """Start each game with 1 to `noop_max` no-op frames, so that games start in different states."""

    def __init__(self, env, noop_max=30):
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.unwrapped.np_random.integers(1, self.noop_max + 1)):
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


class RecordGames(gym.Wrapper):
    """Write whole games to `{video_dir}/train-episode-{k}.mp4` (one frame per agent step) for
    games k = 0, 1, 8, 27, ... up to 729, then every 1000th, as gymnasium's RecordVideo does."""

    def __init__(self, env, video_dir):
        super().__init__(env)
        self.video_dir = Path(video_dir)
        self.games = 0
        self.video = None

    def reset(self, **kwargs):
        from cleanrl_utils.video import VideoWriter

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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def frames(obs):
    """uint8 observations (as the rollout stores them: a quarter of float32's bytes) as floats in
    [0, 1], laid out channels-last: the CPU's convolutions (oneDNN) run about 1.5x faster on that
    layout than on the default one, forward and backward. The uint8 frames are reordered before
    the conversion (a quarter of the bytes to move) and divided in place: 6 ms instead of 34 ms
    for a minibatch of 256 on 2 cores, with the same floats."""
    return obs.contiguous(memory_format=torch.channels_last).float().div_(255.0)


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x):
        return self.critic(self.network(frames(x)))

    def get_action_and_value(self, x, action=None):
        hidden = self.network(frames(x))
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def compute_advantages(
    rewards, values, next_value, terminations, truncations, final_values, gamma, gae_lambda
):
    """GAE over a rollout of shape (num_steps, num_envs).

    Step t's transition ends in `next_values[t]`: the value of the observation the env returned
    after step t. A termination has no future, so it does not bootstrap. A truncation does
    bootstrap, from the value of the episode's last observation (`final_values`): the env has
    already reset, so the next stored observation is the next episode's first.
    Either way the advantage does not chain into the next episode.
    """
    next_values = torch.cat([values[1:], next_value.reshape(1, -1)])
    next_values = torch.where(truncations.bool(), final_values, next_values)
    dones = torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value.reshape(-1))
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminations[t]) - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


@dataclass
class Rollout:
    """One rollout, shape (num_steps, num_envs). Observations stay uint8."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    terminations: torch.Tensor
    truncations: torch.Tensor
    values: torch.Tensor
    # The env resets in the same step that ends an episode, so every stored transition is real. The
    # last observation of a truncated episode is not stored, only its value, to bootstrap from.
    final_values: torch.Tensor

    @classmethod
    def zeros(cls, num_steps, num_envs, obs_shape, device):
        def buffer(dtype=torch.float32, shape=()):
            return torch.zeros((num_steps, num_envs) + shape, dtype=dtype, device=device)

        floats = [buffer() for _ in range(6)]
        return cls(buffer(torch.uint8, obs_shape), buffer(torch.long), *floats)


def collect_rollout(agent, envs, rollout, next_obs, episode_stats):
    """Play num_steps steps in every env. Returns the observation to continue from, and the games
    that ended as (step index, return, length)."""
    device = rollout.obs.device
    finished = []
    for step in range(rollout.obs.shape[0]):
        rollout.obs[step] = next_obs

        # ALGO LOGIC: action logic
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
        rollout.values[step] = value.flatten()
        rollout.actions[step] = action
        rollout.logprobs[step] = logprob

        # TRY NOT TO MODIFY: execute the game and log data.
        next_obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
        rollout.rewards[step] = torch.from_numpy(reward)
        rollout.terminations[step] = torch.from_numpy(terminated)
        rollout.truncations[step] = torch.from_numpy(truncated)
        rollout.final_values[step] = 0
        if truncated.any():
            final_obs = torch.from_numpy(np.stack(info["final_obs"][truncated])).to(device)
            with torch.no_grad():
                final_value = agent.get_value(final_obs).flatten()
            rollout.final_values[step, torch.from_numpy(truncated).to(device)] = final_value
        next_obs = torch.from_numpy(next_obs).to(device)
        for episodic_return, episodic_length in episode_stats.update(info, truncated, acted=True):
            finished.append((step, episodic_return, episodic_length))
    return next_obs, finished


def ppo_loss(agent, args, obs, actions, logprobs, advantages, returns, values):
    """The clipped PPO loss of one minibatch."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(obs, actions)
    logratio = newlogprob - logprobs
    ratio = logratio.exp()

    with torch.no_grad():
        # calculate approx_kl http://joschu.net/blog/kl-approx.html
        old_approx_kl = (-logratio).mean()
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()

    if args.norm_adv:  # (the std of a one-sample minibatch is nan: 0 instead)
        advantages = (advantages - advantages.mean()) / (advantages.std().nan_to_num() + 1e-8)

    # Policy loss
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

    # Value loss
    newvalue = newvalue.view(-1)
    if args.clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = values + torch.clamp(newvalue - values, -args.clip_coef, args.clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    else:
        v_loss = 0.5 * ((newvalue - returns) ** 2).mean()

    entropy_loss = entropy.mean()
    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    return loss, dict(
        value_loss=v_loss,
        policy_loss=pg_loss,
        entropy=entropy_loss,
        old_approx_kl=old_approx_kl,
        approx_kl=approx_kl,
        clipfrac=clipfrac,
    )


def update(agent, optimizer, args, rollout, advantages, returns):
    """update_epochs passes over the rollout in shuffled minibatches; returns the last
    minibatch's statistics, with clipfrac averaged over all minibatches."""
    b_obs = rollout.obs.reshape((-1,) + rollout.obs.shape[2:])
    b = [
        x.reshape(-1)
        for x in (rollout.actions, rollout.logprobs, advantages, returns, rollout.values)
    ]
    b_inds = np.arange(args.batch_size)
    clipfracs = []
    for epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, args.batch_size, args.minibatch_size):
            mb_inds = b_inds[start : start + args.minibatch_size]
            loss, stats = ppo_loss(agent, args, b_obs[mb_inds], *(x[mb_inds] for x in b))
            clipfracs.append(stats["clipfrac"])

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        if args.target_kl is not None and stats["approx_kl"] > args.target_kl:
            break
    stats["clipfrac"] = torch.stack(clipfracs).mean()
    return stats


def explained_variance(values, returns):
    y_pred, y_true = values.cpu().numpy().reshape(-1), returns.cpu().numpy().reshape(-1)
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y


def save_model(path, agent, args):
    import io

    from cleanrl_utils.runs import atomic_write_bytes

    buffer = io.BytesIO()
    torch.save(
        {
            "script": f"cleanrl.{Path(__file__).stem}",
            "script_path": str(Path(__file__).resolve()),
            "args": asdict(args),
            "model_state_dict": agent.state_dict(),
        },
        buffer,
    )
    atomic_write_bytes(path, buffer.getvalue())


if __name__ == "__main__":
    args = tyro.cli(Args)
    check_ppo_args(args)
    atari_ids = [
        env_id
        for env_id, spec in gym.registry.items()
        if spec.entry_point == "ale_py.env:AtariEnv" and spec.kwargs.get("frameskip") == 1
    ]
    check_env_id(args.env_id, atari_ids, "gymnasium's Atari games without frame skip")
    args.batch_size = int(args.num_envs * args.num_steps)
    args.minibatch_size = int(args.batch_size // args.num_minibatches)
    args.num_iterations = args.total_timesteps // args.batch_size
    checkpoints = Checkpoints(args, __file__)  # --resume: finds the checkpoint, or exits if done
    run_name = checkpoints.run_name
    writer = start_run(args, run_name, checkpoints.runs_dir, checkpoints.purge_step)

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup
    video_dir = f"videos/{run_name}" if args.capture_video else None
    envs = make_env(args.env_id, args.num_envs, args.seed, args.async_envs, video_dir)
    assert envs.single_action_space.n > 0, "only discrete action spaces are supported"

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    if args.compile or args.cudagraphs:
        # The same functions, compiled for each input shape in the first iteration, under the
        # same names: the code below reads as without. They draw the same random numbers, so a
        # run learns what the eager run learns, up to float rounding.
        agent.get_action_and_value = torch.compile(
            agent.get_action_and_value,
            # a CUDA graph replays each of the rollout's tiny forward passes without launching
            # its kernels one by one; the rollout copies the outputs before the next replay
            mode="reduce-overhead" if args.cudagraphs else "default",
            dynamic=False,
        )
        compute_advantages = torch.compile(compute_advantages, dynamic=False)
        ppo_loss = torch.compile(ppo_loss, dynamic=False)

    # ALGO Logic: Storage setup
    obs_shape = envs.single_observation_space.shape
    rollout = Rollout.zeros(args.num_steps, args.num_envs, obs_shape, device)

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    next_obs, _ = envs.reset()
    next_obs = torch.from_numpy(next_obs).to(device)
    episode_stats = EpisodeStatistics(args.num_envs)
    avg_returns = deque(maxlen=20)
    if state := checkpoints.restore():
        agent.load_state_dict(state["agent"])
        optimizer.load_state_dict(state["optimizer"])
        avg_returns.extend(state["avg_returns"])
        global_step, start_time = checkpoints.global_step, time.time() - state["elapsed"]
    progress = Progress(args.num_iterations * args.batch_size, start_step=global_step)

    for iteration in range(checkpoints.iteration + 1, args.num_iterations + 1):
        if iteration == checkpoints.fresh_games_at:
            # the emulators cannot be saved: a resumed run starts new games, with a new seed
            next_obs, _ = envs.reset(seed=checkpoints.games_seed(iteration))
            next_obs = torch.from_numpy(next_obs).to(device)
            episode_stats = EpisodeStatistics(args.num_envs)

        iteration_start = time.time()

        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        next_obs, finished = collect_rollout(agent, envs, rollout, next_obs, episode_stats)
        rollout_end = time.time()
        for step, episodic_return, episodic_length in finished:
            game_step = global_step + (step + 1) * args.num_envs
            avg_returns.append(episodic_return)
            writer.add_scalar("charts/episodic_return", episodic_return, game_step)
            writer.add_scalar("charts/episodic_length", episodic_length, game_step)
            writer.add_scalar("charts/avg_episodic_return", np.mean(avg_returns), game_step)
        global_step += args.batch_size

        # bootstrap value if not done
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(-1)
            advantages, returns = compute_advantages(
                rollout.rewards,
                rollout.values,
                next_value,
                rollout.terminations,
                rollout.truncations,
                rollout.final_values,
                args.gamma,
                args.gae_lambda,
            )

        advantages_end = time.time()

        # Optimizing the policy and value network
        stats = update(agent, optimizer, args, rollout, advantages, returns)
        update_end = time.time()

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        sps = global_step / (time.time() - start_time)
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        for name, value in stats.items():
            writer.add_scalar(f"losses/{name}", value.item(), global_step)
        explained_var = explained_variance(rollout.values, returns)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        # where the iteration's time went (benchmark/throughput.py reads these)
        writer.add_scalar("time/rollout", rollout_end - iteration_start, global_step)
        writer.add_scalar("time/advantages", advantages_end - rollout_end, global_step)
        writer.add_scalar("time/update", update_end - advantages_end, global_step)
        progress.update(global_step, sps, np.mean(avg_returns) if avg_returns else None)

        if checkpoints.due(iteration):
            state = {
                "agent": agent.state_dict(),
                "optimizer": optimizer.state_dict(),
                "avg_returns": list(avg_returns),
                "elapsed": time.time() - start_time,
            }
            checkpoints.save(iteration, global_step, state, writer)

    progress.close()
    envs.close()

    if args.save_model or args.capture_video:
        from cleanrl_utils.evals import evaluate

        model_path = f"{checkpoints.run_dir}/{args.exp_name}.cleanrl_model"
        if args.save_model:
            save_model(model_path, agent, args)
            print(f"model saved to {model_path}")
        episodic_returns = evaluate(
            agent,
            make_env,
            EpisodeStatistics,
            env_id=args.env_id,
            eval_episodes=args.eval_episodes,
            seed=args.seed + 1,
            device=device,
            video_dir=video_dir,
        )
        for idx, episodic_return in enumerate(episodic_returns):
            writer.add_scalar("eval/episodic_return", episodic_return, idx)

    writer.close()
    if args.track:
        import wandb

        wandb.finish()
