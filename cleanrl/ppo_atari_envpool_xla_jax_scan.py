# docs and experiment results: docs/ppo_atari_envpool_xla_jax.md
import os
import random
import sys
import time
from collections import deque
from dataclasses import dataclass, field, fields
from functools import partial

import cleanrl_utils.entry  # noqa: F401 (first: a missing extra below is one line, not a traceback)
from cleanrl_utils.after_training import save_and_evaluate
from cleanrl_utils.checks import check_envpool_atari_id, check_ppo_args, parse_args
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.ppo.metrics import explained_variance
from cleanrl_utils.run import Run

import envpool
import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.linen.initializers import constant, orthogonal
from flax.training.train_state import TrainState


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `XLA_FLAGS=--xla_gpu_deterministic_ops=true` (deterministic GPU kernels)"""
    cuda: bool = True
    """if toggled, JAX uses a GPU when a GPU build of jaxlib is installed; otherwise the CPU"""
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
    num_envs: int = 8
    """the number of parallel game environments"""
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
    clip_vloss: bool = False
    """Toggles a clipped value loss (off: the published JAX scripts never clipped it)"""
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


def configure_jax(args):
    """Environment variables that XLA reads once, when JAX starts its backend: call this before
    the first JAX computation. (The published script set `TF_CUDNN DETERMINISTIC`, with a space,
    and TensorFlow's `TF_XLA_FLAGS`: neither is read by JAX.)"""
    if args.torch_deterministic:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_gpu_deterministic_ops=true".strip()
    if not args.cuda:
        jax.config.update("jax_platforms", "cpu")
    # EnvPool and XLA share the GPU: do not let XLA preallocate 75% of its memory
    os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.6")


def make_env(env_id, num_envs, seed, **kwargs):
    # EnvPool does the DeepMind preprocessing itself: no-op starts, frame skip 4 with max-pooling,
    # FIRE on reset, 84x84 grayscale, a stack of 4 frames. `kwargs`: the protocol's settings (the
    # published ones by default: docs/protocols.md). With episodic life a lost life ends the
    # training episode (`terminated`); rewards are clipped to their sign, `info["reward"]` is raw.
    kwargs = dict(max_episode_steps=108_000, episodic_life=True, noop_max=30) | kwargs
    kwargs |= dict(noop_max=max(kwargs["noop_max"], 1), reward_clip=True)  # (EnvPool's 1: none)
    return envpool.make_gym(env_id, num_envs=num_envs, seed=seed, **kwargs)


@flax.struct.dataclass
class EpisodeStatistics:
    """The real game score and length of each env, counted over all lives, as a pytree that the
    jitted environment step updates.

    A game ends when the last life is lost (`info["terminated"]`) or at the time limit
    (`truncated`); `update` returns the new statistics, which envs finished a game in this step,
    and every env's (return, length) so far (meaningful where a game finished). Steps whose action
    EnvPool ignored (the reset step after a done) do not count in the length.
    """

    returns: jax.Array
    lengths: jax.Array

    @classmethod
    def zeros(cls, num_envs):
        return cls(jnp.zeros(num_envs, jnp.float32), jnp.zeros(num_envs, jnp.int32))

    def update(self, info, truncations, acted):
        returns = self.returns + info["reward"]
        lengths = self.lengths + acted
        game_over = (info["terminated"] == 1) | truncations
        new = EpisodeStatistics(
            jnp.where(game_over, 0.0, returns), jnp.where(game_over, 0, lengths)
        )
        return new, game_over, returns, lengths


class Network(nn.Module):
    @nn.compact
    def __call__(self, x):
        # observations stay uint8 until here: the rollout buffer holds a quarter of float32's bytes
        x = jnp.transpose(x, (0, 2, 3, 1)).astype(jnp.float32) / 255.0
        for features, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.Conv(
                features,
                kernel_size=(kernel, kernel),
                strides=(stride, stride),
                padding="VALID",
                kernel_init=orthogonal(np.sqrt(2)),
                bias_init=constant(0.0),
            )(x)
            x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(512, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x)
        return nn.relu(x)


class Actor(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.action_dim, kernel_init=orthogonal(0.01), bias_init=constant(0.0))(x)


class Critic(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1, kernel_init=orthogonal(1), bias_init=constant(0.0))(x)


@flax.struct.dataclass
class AgentParams:
    network: dict
    actor: dict
    critic: dict

    def __contains__(self, key):  # flax's TrainState.apply_gradients asks `key in grads`
        return key in {field.name for field in fields(self)}


class Agent:
    """The Nature CNN shared by an actor head and a critic head: pure functions of AgentParams."""

    def __init__(self, num_actions):
        self.network = Network()
        self.actor = Actor(num_actions)
        self.critic = Critic()

    def init(self, key, obs):
        network_key, actor_key, critic_key = jax.random.split(key, 3)
        network_params = self.network.init(network_key, obs)
        hidden = self.network.apply(network_params, obs)
        return AgentParams(
            network_params,
            self.actor.init(actor_key, hidden),
            self.critic.init(critic_key, hidden),
        )

    def get_value(self, params, x):
        return self.critic.apply(params.critic, self.network.apply(params.network, x))[:, 0]

    def get_action_and_value(self, params, x, key):
        """Sample an action with the Gumbel-max trick: argmax(logits + Gumbel noise)."""
        hidden = self.network.apply(params.network, x)
        logits = self.actor.apply(params.actor, hidden)
        u = jax.random.uniform(key, shape=logits.shape)
        action = jnp.argmax(logits - jnp.log(-jnp.log(u)), axis=1)
        logprob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=1)[:, 0]
        return action, logprob, self.critic.apply(params.critic, hidden)[:, 0]

    def get_logprob_entropy_value(self, params, x, action):
        hidden = self.network.apply(params.network, x)
        logprobs = jax.nn.log_softmax(self.actor.apply(params.actor, hidden))
        logprob = jnp.take_along_axis(logprobs, action[:, None], axis=1)[:, 0]
        entropy = -(jnp.exp(logprobs) * logprobs).sum(axis=1)
        return logprob, entropy, self.critic.apply(params.critic, hidden)[:, 0]


@jax.jit
def compute_advantages(rollout, next_value, gamma, gae_lambda):
    """GAE over the rollout, with `jax.lax.scan(reverse=True)`. A termination does not bootstrap;
    a truncation does, from the last real observation, stored as the next step's."""
    rewards, values = rollout.rewards, rollout.values
    next_values = jnp.concatenate([values[1:], next_value.reshape(1, -1)])
    terminations = rollout.terminations.astype(jnp.float32)
    dones = jnp.maximum(terminations, rollout.truncations.astype(jnp.float32))

    def gae_step(lastgaelam, t):
        reward, value, next_value, termination, done = t
        delta = reward + gamma * next_value * (1.0 - termination) - value
        lastgaelam = delta + gamma * gae_lambda * (1.0 - done) * lastgaelam
        return lastgaelam, lastgaelam

    _, advantages = jax.lax.scan(
        gae_step,
        jnp.zeros_like(next_value.reshape(-1)),
        (rewards, values, next_values, terminations, dones),
        reverse=True,
    )
    return advantages, advantages + values


def masked_mean(x, mask):
    return (x * mask).sum() / jnp.maximum(mask.sum(), 1.0)


@flax.struct.dataclass
class Rollout:
    """One rollout, shape (num_steps, num_envs) (one step: (num_envs,)). Observations stay uint8."""

    obs: jax.Array
    actions: jax.Array
    logprobs: jax.Array
    rewards: jax.Array
    terminations: jax.Array
    truncations: jax.Array
    values: jax.Array
    # EnvPool resets an env on the step *after* it reported done and ignores that step's action:
    # such a transition is fake (reward 0, no decision made), so `valids` masks it out of the loss.
    valids: jax.Array
    # what GAE computes from the rollout, once it is complete
    advantages: jax.Array | None = None
    returns: jax.Array | None = None


@flax.struct.dataclass
class EnvState:
    """What the rollout carries from one step to the next (and from one rollout to the next)."""

    handle: jax.Array  # EnvPool's XLA handle: threads the order of the env steps through XLA
    obs: jax.Array
    valid: jax.Array
    episode_stats: EpisodeStatistics
    key: jax.Array


def rollout_step(agent, step_env, params, env_state):
    """Play one step in every env, inside XLA. Returns the next EnvState, the step's transition,
    and the games that ended in it as (game_over mask, returns, lengths)."""
    # ALGO LOGIC: action logic
    key, action_key = jax.random.split(env_state.key)
    action, logprob, value = agent.get_action_and_value(params, env_state.obs, action_key)

    # TRY NOT TO MODIFY: execute the game and log data.
    handle, (next_obs, reward, terminated, truncated, info) = step_env(env_state.handle, action)
    episode_stats, game_over, returns, lengths = env_state.episode_stats.update(
        info, truncated, env_state.valid
    )
    transition = Rollout(
        env_state.obs, action, logprob, reward, terminated, truncated, value, env_state.valid
    )
    next_valid = ~(terminated | truncated)
    env_state = EnvState(handle, next_obs, next_valid, episode_stats, key)
    return env_state, (transition, (game_over, returns, lengths))


def collect_rollout(rollout_step, params, env_state, num_steps):
    """Play num_steps steps in every env: `rollout_step` driven by `jax.lax.scan` (jit the whole).
    Returns the EnvState to continue from, the Rollout and the games that ended, stacked."""
    env_state, (rollout, games) = jax.lax.scan(
        lambda env_state, _: rollout_step(params, env_state), env_state, length=num_steps
    )
    return env_state, rollout, games


def ppo_loss(agent, args, params, mb):
    """The clipped PPO loss of the minibatch `mb` (a Rollout), averaged over its valid transitions."""
    newlogprob, entropy, newvalue = agent.get_logprob_entropy_value(params, mb.obs, mb.actions)
    logratio = newlogprob - mb.logprobs
    advantages, returns, values, valids = mb.advantages, mb.returns, mb.values, mb.valids
    ratio = jnp.exp(logratio)

    # calculate approx_kl http://joschu.net/blog/kl-approx.html
    old_approx_kl = masked_mean(-logratio, valids)
    approx_kl = masked_mean((ratio - 1) - logratio, valids)
    clipfrac = masked_mean((jnp.abs(ratio - 1.0) > args.clip_coef).astype(jnp.float32), valids)

    if args.norm_adv:
        mean = masked_mean(advantages, valids)
        var = ((advantages - mean) ** 2 * valids).sum() / jnp.maximum(valids.sum() - 1, 1.0)
        advantages = (advantages - mean) / (jnp.sqrt(var) + 1e-8)

    # Policy loss
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
    pg_loss = masked_mean(jnp.maximum(pg_loss1, pg_loss2), valids)

    # Value loss
    if args.clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = values + jnp.clip(newvalue - values, -args.clip_coef, args.clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * masked_mean(jnp.maximum(v_loss_unclipped, v_loss_clipped), valids)
    else:
        v_loss = 0.5 * masked_mean((newvalue - returns) ** 2, valids)

    entropy_loss = masked_mean(entropy, valids)
    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef
    stats = dict(value_loss=v_loss, policy_loss=pg_loss, entropy=entropy_loss)
    stats |= dict(old_approx_kl=old_approx_kl, approx_kl=approx_kl, clipfrac=clipfrac)
    return loss, jax.lax.stop_gradient(stats)


def scan_unroll():
    """How the update's scans are unrolled: entirely on the CPU (`unroll=0`; `unroll=True` keeps
    a one-trip loop when there is one epoch or one minibatch), where the CNN's weight gradients
    inside an XLA:CPU loop take a generic convolution path, about 20x slower (see the docs);
    not at all elsewhere."""
    return 0 if jax.default_backend() == "cpu" else 1


def update(agent, args, agent_state, rollout, advantages, returns, key):
    """update_epochs passes over the rollout in shuffled minibatches, all inside `jax.lax.scan`
    (jit the whole); returns the last minibatch's statistics, with clipfrac averaged over all
    minibatches."""
    rollout = rollout.replace(advantages=advantages, returns=returns)
    batch = jax.tree_util.tree_map(lambda x: x.reshape((args.batch_size,) + x.shape[2:]), rollout)
    unroll = scan_unroll()
    grad_fn = jax.value_and_grad(partial(ppo_loss, agent, args), has_aux=True)

    def update_minibatch(agent_state, minibatch):
        (loss, stats), grads = grad_fn(agent_state.params, minibatch)
        return agent_state.apply_gradients(grads=grads), dict(stats, loss=loss)

    def update_epoch(carry, _):
        agent_state, key, stopped = carry
        key, permutation_key = jax.random.split(key)
        b_inds = jax.random.permutation(permutation_key, args.batch_size)
        shape = (args.num_minibatches, args.minibatch_size)
        minibatches = jax.tree_util.tree_map(
            lambda x: x[b_inds].reshape(shape + x.shape[1:]), batch
        )

        # once an epoch ends above the target KL, the remaining epochs change nothing
        ran = ~stopped
        new_state, stats = jax.lax.scan(update_minibatch, agent_state, minibatches, unroll=unroll)
        agent_state = jax.tree_util.tree_map(partial(jnp.where, ran), new_state, agent_state)
        if args.target_kl is not None:
            stopped = stopped | (stats["approx_kl"][-1] > args.target_kl)
        return (agent_state, key, stopped), (stats, ran)

    carry = (agent_state, key, jnp.array(False))
    (agent_state, key, _), (stats, ran) = jax.lax.scan(
        update_epoch, carry, length=args.update_epochs, unroll=unroll
    )
    # stats have shape (update_epochs, num_minibatches); keep the last epoch that ran
    last_epoch = ran.sum() - 1
    clipfrac = (stats["clipfrac"] * ran[:, None]).sum() / (ran.sum() * args.num_minibatches)
    stats = jax.tree_util.tree_map(lambda x: x[last_epoch, -1], stats)
    stats["clipfrac"] = clipfrac
    return agent_state, stats, key


if __name__ == "__main__":
    # bad input, a checkpoint it cannot use, a full disk: one `error:` line and its exit code
    with entry_point(), Run(parse_args(Args), __file__) as run:
        args = run.args  # --resume: the flags not given come from the checkpoint (a new object)
        check_ppo_args(args)
        check_envpool_atari_id(args.env_id)
        args.batch_size = int(args.num_envs * args.num_steps)
        args.minibatch_size = int(args.batch_size // args.num_minibatches)
        args.num_iterations = args.total_timesteps // args.batch_size
        writer = run.start()  # runs/{run.name}/: config.json, TensorBoard, W&B with --track

        # TRY NOT TO MODIFY: seeding
        random.seed(args.seed)
        np.random.seed(args.seed)
        configure_jax(args)
        key = jax.random.PRNGKey(args.seed)
        key, agent_key, rollout_key = jax.random.split(key, 3)

        # env setup: a resumed run starts new games (emulators cannot be saved), with a new seed
        envs = make_env(args.env_id, args.num_envs, run.games_seed, **run.protocol)

        agent = Agent(envs.action_space.n)
        obs_shape = envs.observation_space.shape

        def linear_schedule(count):
            # count is the number of gradient steps so far: the rate is constant within an iteration
            frac = (
                1.0 - (count // (args.num_minibatches * args.update_epochs)) / args.num_iterations
            )
            return args.learning_rate * frac

        agent_state = TrainState.create(
            apply_fn=None,
            params=jax.jit(agent.init)(agent_key, np.zeros((1,) + obs_shape, np.uint8)),
            tx=optax.chain(
                optax.clip_by_global_norm(args.max_grad_norm),
                optax.inject_hyperparams(optax.adam)(
                    learning_rate=linear_schedule if args.anneal_lr else args.learning_rate,
                    eps=1e-5,
                ),
            ),
        )
        avg_returns, avg_lengths = deque(maxlen=20), deque(maxlen=20)
        state = dict(agent_state=agent_state, key=key, rollout_key=rollout_key)
        state.update(avg_returns=avg_returns, avg_lengths=avg_lengths)
        run.restore(state)  # a resumed run: as checkpointed, the RNGs and step counter too
        # (restore replaced the TrainState and keys in the dict: JAX arrays cannot change in place)
        agent_state, key, rollout_key = state["agent_state"], state["key"], state["rollout_key"]

        # TRY NOT TO MODIFY: start the game
        global_step, start_time = run.global_step, run.start_time
        next_obs, valid = jnp.asarray(envs.reset()[0]), jnp.ones(args.num_envs, dtype=bool)
        handle, _, _, step_env = envs.xla()
        episode_stats = EpisodeStatistics.zeros(args.num_envs)
        env_state = EnvState(handle, next_obs, valid, episode_stats, rollout_key)
        jit_collect_rollout = jax.jit(
            partial(
                collect_rollout, partial(rollout_step, agent, step_env), num_steps=args.num_steps
            )
        )
        jit_get_value = jax.jit(agent.get_value)
        jit_update = jax.jit(partial(update, agent, args))

        for iteration in range(run.start_iteration, args.num_iterations + 1):
            env_state, rollout, games = jit_collect_rollout(agent_state.params, env_state)
            run.lap("rollout", rollout)

            # bootstrap value if not done
            next_value = jit_get_value(agent_state.params, env_state.obs)
            advantages, returns = compute_advantages(
                rollout, next_value, args.gamma, args.gae_lambda
            )
            run.lap("advantages", advantages)

            # Optimizing the policy and value network
            agent_state, stats, key = jit_update(agent_state, rollout, advantages, returns, key)
            run.lap("update", agent_state)

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            game_over, game_returns, game_lengths = jax.device_get(games)
            for step, env in zip(*np.nonzero(game_over)):
                game_step = global_step + (step + 1) * args.num_envs
                avg_returns.append(float(game_returns[step, env]))
                avg_lengths.append(int(game_lengths[step, env]))
                writer.add_scalar("charts/episodic_return", avg_returns[-1], game_step)
                writer.add_scalar("charts/episodic_length", avg_lengths[-1], game_step)
                writer.add_scalar("charts/avg_episodic_return", np.mean(avg_returns), game_step)
                writer.add_scalar("charts/avg_episodic_length", np.mean(avg_lengths), game_step)
            global_step += args.batch_size

            learning_rate = agent_state.opt_state[1].hyperparams["learning_rate"]
            writer.add_scalar("charts/learning_rate", float(learning_rate), global_step)
            for name, value in jax.device_get(stats).items():
                writer.add_scalar(f"losses/{name}", float(value), global_step)
            explained_var = explained_variance(rollout.values, returns, rollout.valids)
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/SPS", global_step / (time.time() - start_time), global_step)
            writer.add_scalar("charts/SPS_update", args.batch_size / run.laps_s, global_step)
            # this iteration's TrainState and keys are new values: the checkpoint's dict takes them
            state.update(agent_state=agent_state, key=key, rollout_key=env_state.key)
            run.end_iteration(iteration, global_step, avg_returns, state)
            if run.stop_requested:  # Ctrl-C, SIGTERM, SIGUSR1: its checkpoint is written
                break

        envs.close()
        # --save-model, --capture-video: save the model, play evaluation games (not after a stop)
        save_and_evaluate(run, agent, make_env, EpisodeStatistics, params=agent_state.params)
    sys.exit(run.exit_code())  # 0; 130 after Ctrl-C, 75 after SIGTERM/SIGUSR1 (SLURM requeues)
