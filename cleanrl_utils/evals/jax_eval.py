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

A model file (flax msgpack: `cleanrl_utils.files.model_file`) or a checkpoint names its script, so
`python -m cleanrl_utils.evals --model-path runs/RUN/EXP.cleanrl_model` needs nothing else (the
one entry point for torch and JAX models; `python -m cleanrl_utils.evals.jax_eval` takes JAX
models only).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cleanrl_utils.console import extras
from cleanrl_utils.console.errors import entry_point, fail
from cleanrl_utils.evals.common import (
    evaluation_games,
    evaluation_video_dir,
    parse_eval_args,
    play_games,
    summary,
    with_training_env,
)
from cleanrl_utils.files.model_file import Model, model_script, read_model


def jax_agent(model: Model, script):
    """The script's agent and the model's parameters on its network's template; exits 2 when they
    do not fit."""
    import flax.serialization
    import jax

    make_env = with_training_env(script.make_env, model.args, model.script)  # its action set
    envs = make_env(model.args["env_id"], 1, model.args["seed"])
    agent = script.Agent(envs.action_space.n)
    obs = np.zeros((1,) + envs.observation_space.shape, np.uint8)
    envs.close()
    template = jax.eval_shape(agent.init, jax.random.PRNGKey(0), obs)  # shapes only
    try:
        params = flax.serialization.from_state_dict(template, model.weights)
        params = jax.tree_util.tree_map(jax.numpy.asarray, params)
        shapes = [x.shape for x in jax.tree_util.tree_leaves(params)]
        if shapes != [x.shape for x in jax.tree_util.tree_leaves(template)]:
            raise ValueError("other shapes")
    except Exception as e:  # parameters of another network
        fail(f"the parameters in {model.path} do not fit {model.script}'s network: {e}")
    return agent, params


def load_model(model_path: str | Path):
    """Returns (script module, training args dict, agent, parameters); exits 2 on a bad file."""
    model = read_model(model_path)
    if model.framework != "jax":
        fail(f"{model_path} is a torch model: load it with cleanrl_utils.evals.load_model")
    script = model_script(model)
    return (script, model.args, *jax_agent(model, script))


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

    `make_env` builds the env as in training (`with_training_env`: under the same protocol), and
    each game's score is its real, unclipped score over all lives. `seed`
    seeds the env and the action sampling, so the same model and seed give the same games. With
    `video_dir`, every game is written to `video_dir/eval-episode-{i}.mp4`.
    """
    render = {"render_mode": "rgb_array"} if video_dir is not None else {}
    envs = make_env(env_id, 1, seed, **render)
    try:
        policy = jax_policy(agent, params, seed)
        finished_games = jax_finished_games(episode_statistics)
        return play_games(envs, policy, finished_games, eval_episodes, video_dir)
    finally:
        envs.close()


def jax_policy(agent, params, seed: int):
    """`play_games`'s policy for a JAX agent: actions sampled with a key split from `seed` at
    each step."""
    import jax

    get_action = jax.jit(agent.get_action_and_value)
    key = jax.random.PRNGKey(seed)

    def policy(obs, done):
        nonlocal key
        key, action_key = jax.random.split(key)
        return np.asarray(get_action(params, obs, action_key)[0])

    return policy


def jax_finished_games(episode_statistics):
    """`play_games`'s statistics for a script's `EpisodeStatistics` pytree, updated by a jitted
    step: the (return, length) of each game that ended."""
    import jax

    stats = episode_statistics.zeros(1)
    update = jax.jit(
        lambda stats, reward, terminated, truncated, acted: stats.update(
            {"reward": reward, "terminated": terminated}, truncated, acted
        )
    )

    def finished_games(info, truncated, acted):
        nonlocal stats
        stats, ended, returns, lengths = update(
            stats, info["reward"], info["terminated"], truncated, acted
        )
        return [(float(returns[i]), int(lengths[i])) for i in np.flatnonzero(np.asarray(ended))]

    return finished_games


def evaluate_model(model: Model, script, args, video_dir: Path | None = None) -> list[float]:
    """The games of `cleanrl_utils.evals.evaluate_model` for a JAX model, recorded in
    `video_dir` when it is given."""
    if not args.cuda:
        import jax

        jax.config.update("jax_platforms", "cpu")
    agent, params = jax_agent(model, script)
    make_env, seed = evaluation_games(model, script, args)
    return evaluate(
        agent,
        params,
        make_env,
        script.EpisodeStatistics,
        env_id=model.args["env_id"],
        eval_episodes=args.eval_episodes,
        seed=seed,
        video_dir=video_dir,
    )


@entry_point()
def main(argv=None):
    """`python -m cleanrl_utils.evals.jax_eval`: a JAX model file or checkpoint."""
    args = parse_eval_args(argv, prog="python -m cleanrl_utils.evals.jax_eval")
    model = read_model(args.model_path)
    if model.framework != "jax":
        fail(f"{args.model_path} is a torch model: evaluate it with python -m cleanrl_utils.evals")
    video_dir = evaluation_video_dir(model, args.video_dir) if args.capture_video else None
    episodic_returns = evaluate_model(model, model_script(model), args, video_dir)
    print(summary(model.args["env_id"], episodic_returns))
    if video_dir is not None:
        print(f"videos: {video_dir}/")
    return episodic_returns


if __name__ == "__main__":
    extras.install()  # a missing optional package: one line naming its install command
    main()
