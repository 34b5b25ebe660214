# docs and experiment results: docs/ppo_atari_lstm.md
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field, fields, replace
from functools import partial

import cleanrl_utils.entry  # noqa: F401 (first: a missing extra below is one line, not a traceback)
from cleanrl_utils.after_training import save_and_evaluate
from cleanrl_utils.checks import check_gymnasium_atari_id, check_ppo_args, parse_args
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.envs import atari_wrappers
from cleanrl_utils.envs.atari_wrappers import EpisodeStatistics
from cleanrl_utils.ppo.metrics import explained_variance
from cleanrl_utils.run import Run

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.distributions.categorical import Categorical


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
    upload_model: bool = False
    """push the run to the Hugging Face Hub after the final evaluation (implies --save-model; the evaluation games are recorded)"""
    hf_entity: str | None = None
    """the Hub user or organisation to push to (default: the logged-in user)"""
    eval_episodes: int = 10
    """the number of games to play when evaluating the final model"""
    checkpoint_every: int = 100
    """write a checkpoint into the run folder every this many iterations (also after the last one, and on Ctrl-C, SIGTERM, SIGUSR1); 0: only then"""
    resume: str | None = None
    """continue a stopped run from its newest checkpoint: its run folder, a checkpoint file, or `auto` (the newest unfinished run of this exp_name, env_id and seed; in a SLURM task, the task's own)"""

    # Algorithm specific arguments
    env_id: str = "BreakoutNoFrameskip-v4"
    """the id of the environment (a gymnasium Atari id without frame skip)"""
    protocol: str | None = None
    """`machado`: all five settings below as Machado et al. (2018), `published`: as the published runs (the defaults); none: as given (docs/protocols.md)"""
    repeat_action_probability: float = 0.0
    """sticky actions: the probability that the emulator repeats the previous action instead of this one, each frame (Machado: 0.25)"""
    full_action_space: bool = False
    """the network chooses among all 18 actions of the Atari console, not the game's minimal set (Machado: on)"""
    episodic_life: bool = True
    """a lost life ends the training episode (the game goes on, FIRE is pressed); with --no-episodic-life only a game over does (Machado)"""
    noop_max: int = 30
    """a game starts with 1 to noop_max no-op frames at random; 0: none (Machado)"""
    max_episode_steps: int = 27_000
    """a game is cut (truncated) after this many agent steps: 27,000 (ALE's 108,000 frames) as in the published runs and in Machado et al.'s protocol"""
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
    """the number of mini-batches (made of whole env sequences: it must divide num_envs)"""
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

    # to be filled in runtime (not flags)
    batch_size: int = field(default=0, init=False)
    """the batch size: num_envs * num_steps"""
    minibatch_size: int = field(default=0, init=False)
    """the mini-batch size: batch_size // num_minibatches"""
    num_iterations: int = field(default=0, init=False)
    """the number of iterations: total_timesteps // batch_size"""


def make_env(env_id, num_envs, seed, async_envs=False, video_dir=None, **kwargs):
    """`num_envs` games, env i seeded with seed + i, each reset in the step that ends its episode."""
    noop_max, episodic_life, kwargs = atari_wrappers.protocol_settings(**kwargs)

    def thunk(idx):
        record = video_dir is not None and idx == 0
        env = gym.make(env_id, **({"render_mode": "rgb_array"} | kwargs if record else kwargs))
        env = gym.wrappers.RecordEpisodeStatistics(env)  # sees every frame: the real game score
        env = atari_wrappers.NoopReset(env, noop_max=noop_max)
        env = gym.wrappers.MaxAndSkipObservation(env, skip=4)
        if record:
            env = atari_wrappers.RecordGames(env, video_dir)
        env = atari_wrappers.EpisodicLife(env) if episodic_life else env
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = atari_wrappers.FireReset(env)
        env = gym.wrappers.TransformReward(env, np.sign)
        env = gym.wrappers.ResizeObservation(env, (84, 84))
        env = atari_wrappers.GrayscaleOpenCV(env)  # (the published runs' conversion)
        env = gym.wrappers.FrameStackObservation(env, 1)  # the LSTM remembers the past
        return env

    thunks = [partial(thunk, idx) for idx in range(num_envs)]
    vector_env = gym.vector.AsyncVectorEnv if async_envs else gym.vector.SyncVectorEnv
    envs = vector_env(thunks, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return atari_wrappers.SeedOnFirstReset(envs, seed)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def frames(obs):
    """uint8 frames as floats in [0, 1], channels-last (oneDNN's convolutions: 1.5x faster)."""
    return obs.contiguous(memory_format=torch.channels_last).float().div_(255.0)


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(1, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(512, 128)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        self.actor = layer_init(nn.Linear(128, envs.single_action_space.n), std=0.01)
        self.critic = layer_init(nn.Linear(128, 1), std=1)

    def initial_state(self, num_envs, device=None):
        """The LSTM (hidden, cell) state of envs whose episode just started: zeros."""
        shape = (self.lstm.num_layers, num_envs, self.lstm.hidden_size)
        return torch.zeros(shape, device=device), torch.zeros(shape, device=device)

    def get_states(self, x, lstm_state, done):
        """The LSTM over T time-major steps of N envs: x (T * N, 1, 84, 84), done (T * N,), lstm_state
        two (1, N, 128). An env's state is zeroed before each step where `done` is 1 (its episode
        ended before it). Returns the outputs (T * N, 128) and the state after the last step."""
        hidden = self.network(frames(x))
        num_envs = lstm_state[0].shape[1]
        hidden = hidden.reshape((-1, num_envs, self.lstm.input_size))
        done = done.reshape((-1, num_envs))
        new_hidden = []
        for h, d in zip(hidden, done):
            keep = (1.0 - d).view(1, -1, 1)
            h, lstm_state = self.lstm(h.unsqueeze(0), (keep * lstm_state[0], keep * lstm_state[1]))
            new_hidden += [h]
        return torch.flatten(torch.cat(new_hidden), 0, 1), lstm_state

    def get_value(self, x, lstm_state, done):
        hidden, _ = self.get_states(x, lstm_state, done)
        return self.critic(hidden)

    def get_action_and_value(self, x, lstm_state, done, action=None):
        hidden, lstm_state = self.get_states(x, lstm_state, done)
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden), lstm_state


def compute_advantages(rollout, next_value, gamma, gae_lambda):
    """GAE over the rollout: a truncation bootstraps from `final_values`, a termination does not."""
    rewards, values, terminations = rollout.rewards, rollout.values, rollout.terminations
    next_values = torch.cat([values[1:], next_value.reshape(1, -1)])
    next_values = torch.where(rollout.truncations.bool(), rollout.final_values, next_values)
    dones = torch.maximum(terminations, rollout.truncations)
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value.reshape(-1))
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminations[t]) - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


@dataclass
class Rollout:
    """One rollout, shape (num_steps, num_envs), and GAE's advantages and returns; uint8 frames."""

    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    terminations: torch.Tensor
    truncations: torch.Tensor
    values: torch.Tensor
    # 1 where the env's episode ended before this step: its LSTM state is zeroed before the step
    dones: torch.Tensor
    # every transition is real (same-step reset); a truncated episode's last value, to bootstrap:
    final_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    @classmethod
    def zeros(cls, args, obs_shape, device):
        shape = (args.num_steps, args.num_envs)
        obs = torch.zeros(shape + obs_shape, dtype=torch.uint8, device=device)
        actions = torch.zeros(shape, dtype=torch.long, device=device)
        floats = {f.name: torch.zeros(shape, device=device) for f in fields(cls)}
        return cls(**floats | dict(obs=obs, actions=actions))

    def minibatch(self, envs):
        """Every field's sequences of the envs `envs`, flattened time-major: what `ppo_loss` reads."""
        return type(self)(**{name: x[:, envs].flatten(0, 1) for name, x in vars(self).items()})


@torch.no_grad()
def collect_rollout(agent, envs, rollout, next_obs, next_done, next_lstm_state, episode_stats):
    """Play num_steps steps in every env, carrying the LSTM state; returns where to continue
    (observation, done flags, LSTM state) and the games that ended."""
    device = rollout.obs.device
    finished = []
    for step in range(rollout.obs.shape[0]):
        rollout.obs[step] = next_obs
        rollout.dones[step] = next_done

        # ALGO LOGIC: action logic
        action, logprob, _, value, next_lstm_state = agent.get_action_and_value(
            next_obs, next_lstm_state, next_done
        )
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
            trunc = torch.from_numpy(truncated).to(device)
            final_obs = torch.from_numpy(np.stack(info["final_obs"][truncated])).to(device)
            # the final observation continues the episode: the LSTM state is not zeroed before it
            final_state = tuple(s[:, trunc] for s in next_lstm_state)
            not_done = torch.zeros(len(final_obs), device=device)
            final_value = agent.get_value(final_obs, final_state, not_done)
            rollout.final_values[step, trunc] = final_value.flatten()
        next_obs = torch.from_numpy(next_obs).to(device)
        next_done = torch.from_numpy(terminated | truncated).float().to(device)
        for episodic_return, episodic_length in episode_stats.update(info, truncated, acted=True):
            finished.append((step, episodic_return, episodic_length))
    return next_obs, next_done, next_lstm_state, finished


def ppo_loss(agent, args, mb, lstm_state):
    """The clipped PPO loss of `mb`: whole env sequences, rerun from their first LSTM state."""
    _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(
        mb.obs, lstm_state, mb.dones, mb.actions
    )
    logratio = newlogprob - mb.logprobs
    advantages, returns, values = mb.advantages, mb.returns, mb.values
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
    stats = dict(value_loss=v_loss, policy_loss=pg_loss, entropy=entropy_loss)
    return loss, stats | dict(old_approx_kl=old_approx_kl, approx_kl=approx_kl, clipfrac=clipfrac)


def update(ppo_loss, agent, optimizer, args, rollout, advantages, returns, initial_lstm_state):
    """update_epochs passes over shuffled minibatches of whole env sequences; returns the stats."""
    envs_per_batch = args.num_envs // args.num_minibatches
    env_inds = np.arange(args.num_envs)
    rollout = replace(rollout, advantages=advantages, returns=returns)
    clipfracs = []
    for epoch in range(args.update_epochs):
        np.random.shuffle(env_inds)
        for start in range(0, args.num_envs, envs_per_batch):
            mb_envs = env_inds[start : start + envs_per_batch]
            mb_state = tuple(s[:, mb_envs] for s in initial_lstm_state)
            loss, stats = ppo_loss(agent, args, rollout.minibatch(mb_envs), mb_state)
            clipfracs.append(stats["clipfrac"])

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        if args.target_kl is not None and stats["approx_kl"] > args.target_kl:
            break
    stats["clipfrac"] = torch.stack(clipfracs).mean()
    return stats


if __name__ == "__main__":
    # bad input, a checkpoint it cannot use, a full disk: one `error:` line and its exit code
    with entry_point(), Run(parse_args(Args), __file__) as run:
        args = run.args  # --resume: the flags not given come from the checkpoint (a new object)
        check_ppo_args(args, whole_sequences=True)  # minibatches of whole env sequences
        check_gymnasium_atari_id(args.env_id)
        args.batch_size = int(args.num_envs * args.num_steps)
        args.minibatch_size = int(args.batch_size // args.num_minibatches)
        args.num_iterations = args.total_timesteps // args.batch_size
        writer = run.start()  # runs/{run.name}/: config.json, TensorBoard, W&B with --track

        # TRY NOT TO MODIFY: seeding
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)
        torch.backends.cudnn.deterministic = args.torch_deterministic

        device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

        # env setup: a resumed run starts new games (emulators cannot be saved), with a new seed
        video_dir = f"videos/{run.name}" if args.capture_video else None
        envs = make_env(
            args.env_id, args.num_envs, run.games_seed, args.async_envs, video_dir, **run.protocol
        )

        agent = Agent(envs).to(device)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        avg_returns = deque(maxlen=20)
        state = {"agent": agent, "optimizer": optimizer, "avg_returns": avg_returns}
        run.restore(state)  # a resumed run: as checkpointed, the RNGs and step counter too

        # ALGO Logic: Storage setup
        rollout = Rollout.zeros(args, envs.single_observation_space.shape, device)

        # TRY NOT TO MODIFY: start the game
        global_step, start_time = run.global_step, run.start_time
        next_obs = torch.from_numpy(envs.reset()[0]).to(device)
        next_done = torch.zeros(args.num_envs, device=device)
        next_lstm_state = agent.initial_state(args.num_envs, device)
        episode_stats = EpisodeStatistics(args.num_envs)

        for iteration in range(run.start_iteration, args.num_iterations + 1):
            if args.anneal_lr:  # Annealing the rate if instructed to do so.
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            initial_lstm_state = tuple(s.clone() for s in next_lstm_state)
            next_obs, next_done, next_lstm_state, finished = collect_rollout(
                agent, envs, rollout, next_obs, next_done, next_lstm_state, episode_stats
            )
            run.lap("rollout")
            for step, episodic_return, episodic_length in finished:
                game_step = global_step + (step + 1) * args.num_envs
                avg_returns.append(episodic_return)
                writer.add_scalar("charts/episodic_return", episodic_return, game_step)
                writer.add_scalar("charts/episodic_length", episodic_length, game_step)
                writer.add_scalar("charts/avg_episodic_return", np.mean(avg_returns), game_step)
            global_step += args.batch_size

            # bootstrap value if not done
            with torch.no_grad():
                next_value = agent.get_value(next_obs, next_lstm_state, next_done).reshape(-1)
                advantages, returns = compute_advantages(
                    rollout, next_value, args.gamma, args.gae_lambda
                )
            run.lap("advantages")

            # Optimizing the policy and value network
            stats = update(
                ppo_loss, agent, optimizer, args, rollout, advantages, returns, initial_lstm_state
            )
            run.lap("update")

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            for name, value in stats.items():
                writer.add_scalar(f"losses/{name}", value.item(), global_step)
            explained_var = explained_variance(rollout.values, returns)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", global_step / (time.time() - start_time), global_step)
            run.end_iteration(iteration, global_step, avg_returns, state)  # a checkpoint when due
            if run.stop_requested:  # Ctrl-C, SIGTERM, SIGUSR1: its checkpoint is written
                break

        envs.close()
        save_and_evaluate(run, agent, make_env, EpisodeStatistics, device)  # (not after a stop)
    sys.exit(run.exit_code())  # 0; 130 after Ctrl-C, 75 after SIGTERM/SIGUSR1 (SLURM requeues)
