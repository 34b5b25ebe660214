"""The two JAX scripts in lockstep: does `ppo_atari_envpool_xla_jax_scan.py` compute what
`ppo_atari_envpool_xla_jax.py` computes, at every iteration of a run, not only the first?

    python benchmark/jax_lockstep.py --iterations 40            # default sizes, seed 1
    python benchmark/jax_lockstep.py --iterations 8 --num-steps 32
    python benchmark/jax_lockstep.py --iterations 5 --from-checkpoint runs/RUN/checkpoint_0000280.ckpt

Both scripts' own functions run side by side from the same state. At each iteration:

- rollout: the loop script's `collect_rollout` (a jitted step in a Python loop) on one EnvPool
  instance and the scan script's (`lax.scan`, one jitted call) on a second instance made with
  the same seed, from the same parameters and keys. While every action agrees, the two games are
  the same games; the first iteration where an action differs is reported (after that the envs
  cannot be brought back together, and the rollout comparison stops);
- GAE and the update: both scripts' on the loop script's rollout, from the same parameters,
  optimizer state (its step count drives the learning-rate schedule) and key;
- then both continue from the loop script's results, so a difference cannot pile up: each
  iteration compares one step of the two programs on equal inputs.

Differences at float-rounding level (~1e-6 relative) everywhere, keys and learning rates equal:
the two scripts are the same algorithm, and any gap between their learning curves is the spread
between runs that such rounding starts. The sizes and the run's length (which sets the schedule)
are the scripts' flags. `--from-checkpoint` starts from a checkpoint of either script's run
(its arguments, parameters, optimizer state and keys, with new games, as a resumed run):
the comparison late in a run, with a trained policy and the learning rate near its end.
Runs on the CPU (JAX's default backend here).
"""

from __future__ import annotations

import dataclasses
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState

from cleanrl_utils.checks import parse_args
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.envs import protocols
from cleanrl_utils.files.scripts import load_script
from cleanrl_utils.files.state_file import read_checkpoint, restored_value
from cleanrl_utils.run.resume import given_flags

loop = load_script("ppo_atari_envpool_xla_jax")
scan = load_script("ppo_atari_envpool_xla_jax_scan")


@dataclasses.dataclass
class Options(loop.Args):
    iterations: int = 40
    """how many iterations to compare (of a run as long as --total-timesteps says)"""
    total_timesteps: int = 307_200
    """the run's length: it sets the learning-rate schedule"""
    from_checkpoint: str | None = None
    """start from this checkpoint of a run of either script (its arguments replace the flags)"""


def max_rel(a, b) -> float:
    """The largest difference between two pytrees of arrays, relative to the largest value."""
    worst = 0.0
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape == y.shape and np.array_equal(x, y):
            continue  # (0: equal leaves, the observations above all, need no float64 copies)
        x, y = x.astype(np.float64), y.astype(np.float64)
        worst = max(worst, float(np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1e-12)))
    return worst


def lockstep(args: Options, report=print) -> list[dict]:
    """Runs `args.iterations` iterations of both scripts side by side; returns one record per
    iteration (same actions, the largest relative differences, the learning rates, equal keys)
    and passes a line of the table to `report` for each."""
    payload = None
    if args.from_checkpoint is not None:
        payload = read_checkpoint(Path(args.from_checkpoint))
        flags = {f.name for f in dataclasses.fields(loop.Args) if f.init}  # not the sizes
        saved = {k: v for k, v in payload["args"].items() if k in flags}
        args = dataclasses.replace(args, **saved)
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = args.total_timesteps // args.batch_size
    key = jax.random.PRNGKey(args.seed)
    key, agent_key, rollout_key = jax.random.split(key, 3)
    envs_a = loop.make_env(args.env_id, args.num_envs, args.seed, **protocols.settings(args))
    envs_b = scan.make_env(args.env_id, args.num_envs, args.seed, **protocols.settings(args))
    agent = loop.Agent(envs_a.action_space.n)

    def schedule(count):  # the scripts' linear_schedule
        frac = 1.0 - (count // (args.num_minibatches * args.update_epochs)) / args.num_iterations
        return args.learning_rate * frac

    obs_shape = envs_a.observation_space.shape
    agent_state = TrainState.create(
        apply_fn=None,
        params=jax.jit(agent.init)(agent_key, np.zeros((1,) + obs_shape, np.uint8)),
        tx=optax.chain(
            optax.clip_by_global_norm(args.max_grad_norm),
            optax.inject_hyperparams(optax.adam)(learning_rate=schedule, eps=1e-5),
        ),
    )
    first = 1
    if payload is not None:  # as a resumed run: the checkpointed state, new games
        saved = payload["state"]
        agent_state = restored_value(agent_state, saved["agent_state"])
        key, rollout_key = (jnp.asarray(saved[name]) for name in ("key", "rollout_key"))
        first = payload["iteration"] + 1
    states = []
    for script, envs in ((loop, envs_a), (scan, envs_b)):
        obs = jnp.asarray(envs.reset()[0])
        handle, _, _, step_env = envs.xla()
        stats = script.EpisodeStatistics.zeros(args.num_envs)
        valid = jnp.ones(args.num_envs, dtype=bool)
        states.append((script.EnvState(handle, obs, valid, stats, rollout_key), step_env))
    (env_a, step_a), (env_b, step_b) = states
    loop_step = jax.jit(partial(loop.rollout_step, agent, step_a))
    scan_rollout = jax.jit(
        partial(
            scan.collect_rollout,
            partial(scan.rollout_step, agent, step_b),
            num_steps=args.num_steps,
        )
    )
    get_value = jax.jit(agent.get_value)
    loop_minibatch = jax.jit(partial(loop.update_minibatch, agent, args))
    scan_update = jax.jit(partial(scan.update, agent, args))
    in_step, rollout_diff = True, float("nan")
    records = []
    report("iteration  actions  rollout  GAE      update   stats    lr        keys")
    worst = {"rollout": 0.0, "gae": 0.0, "update": 0.0, "stats": 0.0}
    for iteration in range(first, min(first + args.iterations, args.num_iterations + 1)):
        params = agent_state.params
        env_a, rollout, games = loop.collect_rollout(loop_step, params, env_a, args.num_steps)
        if in_step:
            env_b, rollout_b, games_b = scan_rollout(params, env_b)
            same_actions = bool(jnp.all(rollout.actions == rollout_b.actions))
            rollout_diff = max_rel(rollout, rollout_b)
            in_step = same_actions
            worst["rollout"] = max(worst["rollout"], rollout_diff)
        actions = "same" if in_step else "differ"
        next_value = get_value(params, env_a.obs)
        advantages, returns = loop.compute_advantages(
            rollout, next_value, args.gamma, args.gae_lambda
        )
        adv_b, ret_b = scan.compute_advantages(rollout, next_value, args.gamma, args.gae_lambda)
        gae_diff = max_rel((advantages, returns), (adv_b, ret_b))
        state_a, stats_a, key_a = loop.update(
            loop_minibatch, args, agent_state, rollout, advantages, returns, key
        )
        state_b, stats_b, key_b = scan_update(agent_state, rollout, advantages, returns, key)
        update_diff = max_rel(state_a.params, state_b.params)
        stats_diff = max_rel(stats_a, stats_b)
        lr = [s.opt_state[1].hyperparams["learning_rate"] for s in (state_a, state_b)]
        same_keys = bool(jnp.all(key_a == key_b)) and int(state_a.step) == int(state_b.step)
        for name, value in (("gae", gae_diff), ("update", update_diff), ("stats", stats_diff)):
            worst[name] = max(worst[name], value)
        records.append(
            dict(
                same_actions=in_step,
                rollout=rollout_diff,
                gae=gae_diff,
                update=update_diff,
                stats=stats_diff,
                learning_rates=[float(x) for x in lr],
                same_keys=same_keys,
            )
        )
        report(
            f"{iteration:9d}  {actions:7s}  {rollout_diff if in_step else float('nan'):.1e}  "
            f"{gae_diff:.1e}  {update_diff:.1e}  {stats_diff:.1e}  "
            f"{float(lr[0]):.3e}{'=' if float(lr[0]) == float(lr[1]) else '!'}  "
            f"{'equal' if same_keys else 'DIFFER'}"
        )
        agent_state, key = state_a, key_a
    report(f"largest relative differences: { {k: f'{v:.1e}' for k, v in worst.items()} }")
    return records


def options(argv: list[str] | None = None) -> Options:
    """The command line as a run reads it: bad input is one `error:` line and exit 2, and
    `--protocol machado` gives its five settings (a setting given against it is bad input)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(Options, argv)
    return protocols.resolved(args, given_flags(args, argv))


@entry_point()
def main() -> None:
    lockstep(options(), report=lambda line: print(line, flush=True))


if __name__ == "__main__":
    main()
