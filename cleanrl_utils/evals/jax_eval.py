"""Evaluate a trained JAX agent: play whole games, return their real scores, optionally record them.

The JAX twin of `cleanrl_utils.evals` (which serves the torch scripts), for
`cleanrl/ppo_atari_envpool_xla_jax.py` and `cleanrl/ppo_atari_envpool_xla_jax_scan.py`. A script
provides:

- `make_env(env_id, num_envs, seed, **kwargs)`: a seeded EnvPool env with the gymnasium API
  (`reset()` -> `(obs, info)`, `step(actions)` -> 5-tuple, `render()` with
  `render_mode="rgb_array"`); an env that reported a done resets on the *next* step, ignoring
  that step's action.
- `EpisodeStatistics`, a pytree with `zeros(num_envs)` and `update(info, truncations, acted)`
  returning (new statistics, game_over mask, returns, lengths): a game's real score over all
  lives, reported when the last life is lost or at the time limit; `acted[i]` is False where env
  i ignored this step's action.
- `Agent(num_actions)` with `init(key, obs)` -> parameters and
  `get_action_and_value(params, obs, key)` -> (action, logprob, value).

A saved `.cleanrl_model` file (flax msgpack: script name and path, the arguments, the
parameters) names its script, so
`python -m cleanrl_utils.evals.jax_eval --model-path runs/RUN/EXP.cleanrl_model` needs nothing
else.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from cleanrl_utils.checks import fail
from cleanrl_utils.evals.common import game_over, parse_eval_args, summary
from cleanrl_utils.runs import atomic_write_bytes
from cleanrl_utils.scripts import load_script


def save_model(path: str | Path, params, args, script_file: str) -> None:
    """`--save-model`'s file: the training script's module name and path, its arguments and the
    parameters, in one flax msgpack file written atomically."""
    import flax.serialization
    import jax

    data = {
        "script": f"cleanrl.{Path(script_file).stem}",
        "script_path": str(Path(script_file).resolve()),
        "args": dataclasses.asdict(args),
        "params": flax.serialization.to_state_dict(jax.device_get(params)),
    }
    atomic_write_bytes(path, flax.serialization.msgpack_serialize(data))
    print(f"model saved to {path}")


def save_and_evaluate(run, agent, params, make_env, episode_statistics) -> None:
    """What a JAX script does after training: with `--save-model`, writes the model to
    `{run.dir}/{exp_name}.cleanrl_model`; with `--save-model` or `--capture-video`, plays
    `--eval-episodes` games with a new seed (`seed + 1`), recorded under `videos/{run.name}/` with
    `--capture-video`, and logs each game's score as `eval/episodic_return`. Nothing after a stop
    signal: the run is not over."""
    args = run.args
    if run.stop_requested or not (args.save_model or args.capture_video):
        return
    if args.save_model:
        save_model(run.dir / f"{args.exp_name}.cleanrl_model", params, args, run.script_file)
    print(f"evaluating on {args.eval_episodes} games (--eval-episodes), seed {args.seed + 1}")
    episodic_returns = evaluate(
        agent,
        params,
        make_env,
        episode_statistics,
        env_id=args.env_id,
        eval_episodes=args.eval_episodes,
        seed=args.seed + 1,
        video_dir=f"videos/{run.name}" if args.capture_video else None,
    )
    for idx, episodic_return in enumerate(episodic_returns):
        run.writer.add_scalar("eval/episodic_return", episodic_return, idx)


def load_model(model_path: str | Path):
    """Returns (script module, training args dict, agent, parameters); exits 2 on a bad file."""
    import flax.serialization
    import jax

    model_path = Path(model_path)
    if not model_path.is_file():
        fail(f"model file not found: {model_path}")
    try:
        checkpoint = flax.serialization.msgpack_restore(model_path.read_bytes())
        script = load_script(checkpoint["script"])
        args = checkpoint["args"]
        envs = script.make_env(args["env_id"], 1, args["seed"])
        agent = script.Agent(envs.action_space.n)
        obs = np.zeros((1,) + envs.observation_space.shape, np.uint8)
        envs.close()
        template = jax.eval_shape(agent.init, jax.random.PRNGKey(0), obs)  # shapes only
        params = flax.serialization.from_state_dict(template, checkpoint["params"])
        params = jax.tree_util.tree_map(jax.numpy.asarray, params)
        shapes = [x.shape for x in jax.tree_util.tree_leaves(params)]
        if shapes != [x.shape for x in jax.tree_util.tree_leaves(template)]:
            raise ValueError("the parameters do not fit the script's network")
    except Exception as e:  # a truncated or foreign file: say which, without a traceback
        fail(f"cannot read model file {model_path}: {type(e).__name__}: {e}")
    return script, args, agent, params


def evaluate(
    agent,
    params,
    make_env,
    episode_statistics,
    env_id: str,
    eval_episodes: int = 10,
    seed: int = 1,
    video_dir: str | Path | None = None,
) -> list[float]:
    """Play `eval_episodes` whole games in one env, sampling actions from the policy.

    The env is built exactly as in training (a lost life ends the training episode and the env
    presses FIRE), and each game's score is its real, unclipped score over all lives. `seed`
    seeds the env and the action sampling, so the same model and seed give the same games. With
    `video_dir`, every game is written to `video_dir/eval-episode-{i}.mp4`.
    """
    import jax

    render = {"render_mode": "rgb_array"} if video_dir is not None else {}
    envs = make_env(env_id, 1, seed, **render)
    try:
        policy = jax.jit(agent.get_action_and_value)
        return play(
            policy, params, envs, episode_statistics.zeros(1), eval_episodes, seed, video_dir
        )
    finally:
        envs.close()


def play(policy, params, envs, stats, eval_episodes, seed, video_dir) -> list[float]:
    import jax

    from cleanrl_utils.video import VideoWriter

    key = jax.random.PRNGKey(seed)
    update_stats = jax.jit(
        lambda stats, reward, terminated, truncated, acted: stats.update(
            {"reward": reward, "terminated": terminated}, truncated, acted
        )
    )
    obs, _ = envs.reset()
    done = np.zeros(1, dtype=bool)
    episodic_returns = []
    video = None
    while len(episodic_returns) < eval_episodes:
        if video_dir is not None and video is None:
            video = VideoWriter(Path(video_dir) / f"eval-episode-{len(episodic_returns)}.mp4")
            video.append(envs.render()[0])
        key, action_key = jax.random.split(key)
        action = np.asarray(policy(params, obs, action_key)[0])
        acted = ~done  # EnvPool ignores the action of the step after a done
        obs, _, terminated, truncated, info = envs.step(action)
        done = terminated | truncated
        if video is not None:
            video.append(envs.render()[0])
        stats, ended, returns, lengths = update_stats(
            stats, info["reward"], info["terminated"], truncated, acted
        )
        for i in np.flatnonzero(np.asarray(ended)):
            video = game_over(episodic_returns, float(returns[i]), int(lengths[i]), video)
    return episodic_returns


def main(argv=None):
    args = parse_eval_args(argv)
    if not args.cuda:
        import jax

        jax.config.update("jax_platforms", "cpu")
    script, train_args, agent, params = load_model(args.model_path)
    episodic_returns = evaluate(
        agent,
        params,
        script.make_env,
        script.EpisodeStatistics,
        env_id=train_args["env_id"],
        eval_episodes=args.eval_episodes,
        seed=args.seed,
        video_dir=args.video_dir if args.capture_video else None,
    )
    print(summary(train_args["env_id"], episodic_returns))
    return episodic_returns


if __name__ == "__main__":
    main()
