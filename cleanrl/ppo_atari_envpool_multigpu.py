# docs and experiment results: docs/ppo_atari_envpool_multigpu.md
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field, fields, replace
from typing import Literal

import cleanrl_utils.entry  # noqa: F401 (first: a missing extra below is one line, not a traceback)
from cleanrl_utils.after_training import save_and_evaluate
from cleanrl_utils.checks import check_envpool_atari_id, check_ppo_args, parse_args
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.distributed.torch_ranks import Distributed
from cleanrl_utils.ppo.compile import compiled
from cleanrl_utils.ppo.metrics import explained_variance
from cleanrl_utils.run import Run

import envpool
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
    """whether to record videos of the evaluation episodes at the end (under `videos/{run_name}/`)"""
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
    env_id: str = "Breakout-v5"
    """the id of the environment (an EnvPool Atari id)"""
    protocol: str | None = None
    """`machado`: all five settings below as Machado et al. (2018), `published`: as the published runs (the defaults); none: as given (docs/protocols.md)"""
    repeat_action_probability: float = 0.0
    """sticky actions: the probability that the emulator repeats the previous action instead of this one, each frame (Machado: 0.25)"""
    full_action_space: bool = False
    """the network chooses among all 18 actions of the Atari console, not the game's minimal set (Machado: on)"""
    episodic_life: bool = True
    """a lost life ends the training episode (the game goes on, EnvPool presses FIRE); with --no-episodic-life only a game over does (Machado)"""
    noop_max: int = 30
    """a game starts with 0 to noop_max - 1 no-op frames at random (EnvPool's count); 0: none (Machado)"""
    max_episode_steps: int = 108_000
    """a game is cut (truncated) after this many agent steps: 108,000 as in the published runs; 27,000 (108,000 frames) in Machado et al.'s protocol"""
    total_timesteps: int = 10000000
    """total timesteps of the experiments"""
    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    local_num_envs: int = 4
    """the number of parallel game environments of each process (all: local_num_envs * world size)"""
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
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    """the torch.distributed backend: auto (nccl when the processes run on GPUs, else gloo), gloo (CPUs, or GPUs slowly), nccl (GPUs)"""
    device_ids: tuple[int, ...] = ()
    """the GPU of each process on a node, by local rank (default: local rank i takes GPU i)"""

    # to be filled in runtime (not flags)
    num_envs: int = field(default=0, init=False)
    """the number of parallel game environments of all processes: local_num_envs * world size"""
    batch_size: int = field(default=0, init=False)
    """the batch size: num_envs * num_steps"""
    minibatch_size: int = field(default=0, init=False)
    """the mini-batch size: batch_size // num_minibatches"""
    num_iterations: int = field(default=0, init=False)
    """the number of iterations: total_timesteps // batch_size"""


def make_env(env_id, num_envs, seed, **kwargs):
    # EnvPool does the DeepMind preprocessing itself: no-op starts, frame skip 4 with max-pooling,
    # FIRE on reset, 84x84 grayscale, a stack of 4 frames. `kwargs`: the protocol's settings (the
    # published ones by default: docs/protocols.md). With episodic life a lost life ends the
    # training episode (`terminated`); rewards are clipped to their sign, `info["reward"]` is raw.
    kwargs = dict(max_episode_steps=108_000, episodic_life=True, noop_max=30) | kwargs
    kwargs |= dict(noop_max=max(kwargs["noop_max"], 1), reward_clip=True)  # (EnvPool's 1: none)
    return envpool.make_gym(env_id, num_envs=num_envs, seed=seed, **kwargs)


class EpisodeStatistics:
    """Each env's real game score and length over all lives; `update` returns (return, length) of
    the games over (last life lost, or time limit). Steps EnvPool ignored do not count."""

    def __init__(self, num_envs):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def update(self, info, truncations, acted):
        self.returns += info["reward"]
        self.lengths += acted
        game_over = (info["terminated"] == 1) | truncations
        finished = list(zip(self.returns[game_over].tolist(), self.lengths[game_over].tolist()))
        self.returns[game_over] = 0
        self.lengths[game_over] = 0
        return finished


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


def compute_advantages(rollout, next_value, gamma, gae_lambda):
    """GAE over the rollout. A termination does not bootstrap; a truncation does, from the last
    real observation, stored as the next step's (whose action EnvPool ignores)."""
    rewards, values, terminations = rollout.rewards, rollout.values, rollout.terminations
    next_values = torch.cat([values[1:], next_value.reshape(1, -1)])
    dones = torch.maximum(terminations, rollout.truncations)
    advantages = torch.zeros_like(rewards)
    lastgaelam = torch.zeros_like(next_value.reshape(-1))
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1.0 - terminations[t]) - values[t]
        lastgaelam = delta + gamma * gae_lambda * (1.0 - dones[t]) * lastgaelam
        advantages[t] = lastgaelam
    return advantages, advantages + values


def masked_mean(x, mask, count):
    """This rank's share of a mean over the minibatch's valid transitions (`count`: all ranks')."""
    return (x * mask).sum() / count


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
    # EnvPool resets an env on the step *after* it reported done and ignores that step's action:
    # such a transition is fake (reward 0, no decision made), so `valids` masks it out of the loss.
    valids: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor

    @classmethod
    def zeros(cls, args, obs_shape, device):
        shape = (args.num_steps, args.local_num_envs)
        obs = torch.zeros(shape + obs_shape, dtype=torch.uint8, device=device)
        actions = torch.zeros(shape, dtype=torch.long, device=device)
        floats = {f.name: torch.zeros(shape, device=device) for f in fields(cls)}
        return cls(**floats | dict(obs=obs, actions=actions))

    def minibatch(self, inds):
        """The transitions `inds` of the flattened rollout, every field: what `ppo_loss` reads."""
        return type(self)(**{name: x.flatten(0, 1)[inds] for name, x in vars(self).items()})


@torch.no_grad()
def collect_rollout(policy, envs, rollout, next_obs, next_valid, episode_stats):
    """Play num_steps steps in every env; returns where to continue and the games that ended."""
    device = rollout.obs.device
    finished = []
    for step in range(rollout.obs.shape[0]):
        rollout.obs[step] = next_obs
        rollout.valids[step] = torch.from_numpy(next_valid)

        # ALGO LOGIC: action logic
        action, logprob, _, value = policy(next_obs)
        rollout.values[step] = value.flatten()
        rollout.actions[step] = action
        rollout.logprobs[step] = logprob

        # TRY NOT TO MODIFY: execute the game and log data.
        next_obs, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
        acted = next_valid
        next_valid = ~(terminated | truncated)
        rollout.rewards[step] = torch.from_numpy(reward)
        rollout.terminations[step] = torch.from_numpy(terminated)
        rollout.truncations[step] = torch.from_numpy(truncated)
        next_obs = torch.from_numpy(next_obs).to(device)
        for episodic_return, episodic_length in episode_stats.update(info, truncated, acted):
            finished.append((step, episodic_return, episodic_length))
    return next_obs, next_valid, finished


def ppo_loss(agent, args, mb, real, dist):
    """This rank's share `mb` (a Rollout) of the clipped PPO loss of one minibatch, averaged over
    the valid transitions of all ranks (global sums): the ranks' shares add up to its loss.
    `real`: 1. for this rank's transitions, 0. for padding (--compile's fixed shape)."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb.obs, mb.actions)
    logratio = newlogprob - mb.logprobs
    advantages, returns, values, valids = mb.advantages, mb.returns, mb.values, mb.valids * real
    # one collective: the count, mean and variance of the valid advantages of every rank's share
    valid_count, adv_mean, adv_var = dist.moments(advantages, valids)
    count = valid_count.clamp(min=1.0)
    ratio = logratio.exp()

    with torch.no_grad():
        # calculate approx_kl http://joschu.net/blog/kl-approx.html
        old_approx_kl = masked_mean(-logratio, valids, count)
        approx_kl = masked_mean((ratio - 1) - logratio, valids, count)
        clipfrac = masked_mean(((ratio - 1.0).abs() > args.clip_coef).float(), valids, count)

    if args.norm_adv:
        advantages = (advantages - adv_mean) / (adv_var.sqrt() + 1e-8)

    # Policy loss
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = masked_mean(torch.max(pg_loss1, pg_loss2), valids, count)

    # Value loss
    newvalue = newvalue.view(-1)
    if args.clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = values + torch.clamp(newvalue - values, -args.clip_coef, args.clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * masked_mean(torch.max(v_loss_unclipped, v_loss_clipped), valids, count)
    else:
        v_loss = 0.5 * masked_mean((newvalue - returns) ** 2, valids, count)

    entropy_loss = masked_mean(entropy, valids, count)
    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    stats = dict(value_loss=v_loss, policy_loss=pg_loss, entropy=entropy_loss)
    return loss, stats | dict(old_approx_kl=old_approx_kl, approx_kl=approx_kl, clipfrac=clipfrac)


def update(ppo_loss, agent, optimizer, args, rollout, advantages, returns, dist):
    """update_epochs passes over the global rollout in shuffled minibatches; returns the last
    stats. Every rank draws the same permutation (a generator of its own, seeded alike, checked
    every iteration) and plays its part of each minibatch: the ranks' parts together are the
    single-process minibatch."""
    rollout = replace(rollout, advantages=advantages, returns=returns)
    b_inds = np.arange(args.batch_size)
    clipfracs = []
    for epoch in range(args.update_epochs):
        dist.shuffle(b_inds)
        for start in range(0, args.batch_size, args.minibatch_size):
            mb_inds = b_inds[start : start + args.minibatch_size]
            mb_inds, real, loss_fn = dist.share(mb_inds, args, ppo_loss)  # padded with --compile
            loss, stats = loss_fn(agent, args, rollout.minibatch(mb_inds), real, dist)
            clipfracs.append(stats["clipfrac"])

            optimizer.zero_grad()
            loss.backward()
            dist.sum_gradients(agent)  # the gradient of the whole minibatch's loss, on every rank
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        stats = dist.sum_values(stats)  # the means over all ranks' transitions
        if args.target_kl is not None and stats["approx_kl"] > args.target_kl:
            break
    stats["clipfrac"] = dist.sum(torch.stack(clipfracs)).mean()
    return stats


if __name__ == "__main__":
    # bad input, a checkpoint it cannot use, a full disk: one `error:` line and its exit code
    with entry_point(), Run(parse_args(Args), __file__, dist=Distributed) as run:
        args = run.args  # --resume: the flags not given come from the checkpoint (a new object)
        dist = run.dist  # RANK, WORLD_SIZE, ... from torchrun (alone: one process); rank 0 writes
        args.num_envs = args.local_num_envs * dist.world_size
        check_ppo_args(args)
        check_envpool_atari_id(args.env_id)
        dist.connect(run)  # the process group; ranks differing in arguments or run: one error line
        args.batch_size = int(args.num_envs * args.num_steps)
        args.minibatch_size = int(args.batch_size // args.num_minibatches)
        args.num_iterations = args.total_timesteps // args.batch_size
        writer = run.start()  # runs/{run.name}/: config.json, TensorBoard, W&B with --track

        # TRY NOT TO MODIFY: seeding: each rank samples its own actions
        random.seed(args.seed + dist.rank)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed + dist.rank)
        torch.backends.cudnn.deterministic = args.torch_deterministic

        device = dist.device

        # env setup: a resumed run starts new games (emulators cannot be saved), with a new seed
        # rank r's envs are envs r * local_num_envs... of one process's num_envs (env i: seed + i)
        games_seed = run.games_seed + dist.rank * args.local_num_envs
        envs = make_env(args.env_id, args.local_num_envs, games_seed, **run.protocol)

        agent = Agent(envs).to(device)
        dist.broadcast_parameters(agent)  # every rank starts from rank 0's network
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        avg_returns = deque(maxlen=20)
        state = {"agent": agent, "optimizer": optimizer, "avg_returns": avg_returns}
        state["shuffle"] = dist.shuffler  # the minibatch permutations' generator, seeded alike
        run.restore(state)  # a resumed run: as checkpointed, the RNGs and step counter too

        policy_fn, advantages_fn, loss_fn = compiled(args, agent, compute_advantages, ppo_loss)

        # ALGO Logic: Storage setup
        rollout = Rollout.zeros(args, envs.single_observation_space.shape, device)

        # TRY NOT TO MODIFY: start the game
        global_step, start_time = run.global_step, run.start_time
        next_obs = torch.from_numpy(envs.reset()[0]).to(device)
        next_valid = np.ones(args.local_num_envs, dtype=bool)
        episode_stats = EpisodeStatistics(args.local_num_envs)

        for iteration in range(run.start_iteration, args.num_iterations + 1):
            if args.anneal_lr:  # Annealing the rate if instructed to do so.
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            next_obs, next_valid, finished = collect_rollout(
                policy_fn, envs, rollout, next_obs, next_valid, episode_stats
            )
            run.lap("rollout")
            finished = sorted(sum(dist.gather(finished) or [], []), key=lambda game: game[0])
            for step, episodic_return, episodic_length in finished:  # every rank's, on rank 0
                game_step = global_step + (step + 1) * args.num_envs
                avg_returns.append(episodic_return)
                writer.add_scalar("charts/episodic_return", episodic_return, game_step)
                writer.add_scalar("charts/episodic_length", episodic_length, game_step)
                writer.add_scalar("charts/avg_episodic_return", np.mean(avg_returns), game_step)
            global_step += args.batch_size

            # bootstrap value if not done
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(-1)
                advantages, returns = advantages_fn(
                    rollout, next_value, args.gamma, args.gae_lambda
                )
            run.lap("advantages")

            # Optimizing the policy and value network
            stats = update(loss_fn, agent, optimizer, args, rollout, advantages, returns, dist)
            run.lap("update")

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            for name, value in stats.items():
                writer.add_scalar(f"losses/{name}", value.item(), global_step)
            every_rank = [dist.cat(x, 1) for x in (rollout.values, returns, rollout.valids)]
            explained_var = explained_variance(*every_rank)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", global_step / (time.time() - start_time), global_step)
            run.end_iteration(iteration, global_step, avg_returns, state)  # a checkpoint when due
            if run.stop_requested:  # Ctrl-C, SIGTERM, SIGUSR1: its checkpoint is written
                break

        envs.close()
        if dist.is_main:
            save_and_evaluate(run, agent, make_env, EpisodeStatistics, device)  # (not after a stop)
    sys.exit(run.exit_code())  # 0; 130 after Ctrl-C, 75 after SIGTERM/SIGUSR1 (SLURM requeues)
