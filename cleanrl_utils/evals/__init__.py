"""Evaluate a trained agent: play whole games, return their real scores, optionally record them.

One entry point for the torch scripts in cleanrl/. A script provides:

- `make_env(env_id, num_envs, seed, **kwargs)`: a seeded vector env with the gymnasium API
  (`reset()` -> `(obs, info)`, `step(actions)` -> 5-tuple, `render()` with
  `render_mode="rgb_array"`), whose `metadata["autoreset_mode"]` says when an env that reported
  a done resets: on the *next* step, ignoring that step's action (EnvPool; gymnasium's default
  `NEXT_STEP`, also assumed when the key is missing), or in the *same* step (`SAME_STEP`).
- `EpisodeStatistics(num_envs)` with `update(info, truncations, acted)`, which returns the
  (return, length) of each game that ended in this step; `acted[i]` is False where env i ignored
  this step's action (only ever the step after a done, with next-step autoreset).
- `Agent(envs)` with `get_action_and_value(obs)` returning the action first; a recurrent agent
  also has `initial_state(num_envs, device)`, and then `get_action_and_value(obs, state, done)`
  returns the next state last; `done[i]` is 1 where env i's episode ended before this step.

A model file (`cleanrl_utils.files.model_file`: safetensors for the torch scripts, flax msgpack for the
JAX ones) or a checkpoint names its script, so
`python -m cleanrl_utils.evals --model-path runs/RUN/EXP.cleanrl_model` needs nothing else; it
plays a JAX model's games with `cleanrl_utils.evals.jax_eval`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from cleanrl_utils.console.errors import DISK_EXIT, entry_point, fail
from cleanrl_utils.console.output import cause
from cleanrl_utils.envs.video import WRITE_ERRORS
from cleanrl_utils.evals.common import (
    evaluation_games,
    evaluation_video_dir,
    parse_eval_args,
    play_games,
    summary,
    with_training_env,
)
from cleanrl_utils.files.model_file import Model, model_script, read_model


def torch_agent(model: Model, script, device: str | torch.device = "cpu"):
    """The script's agent with the model's weights, in eval mode; exits 2 when they do not fit."""
    make_env = with_training_env(script.make_env, model.args, model.script)  # its action set
    envs = make_env(model.args["env_id"], 1, model.args["seed"])
    agent = script.Agent(envs).to(device)
    envs.close()
    try:
        agent.load_state_dict(model.weights)
    except Exception as e:  # weights of another network
        fail(f"the weights in {model.path} do not fit {model.script}'s network: {e}")
    agent.eval()
    return agent


def load_model(model_path: str | Path, device: str | torch.device = "cpu"):
    """Returns (script module, training args dict, agent in eval mode); exits 2 on a bad file."""
    model = read_model(model_path)
    if model.framework != "torch":
        fail(f"{model_path} is a JAX model: load it with cleanrl_utils.evals.jax_eval.load_model")
    script = model_script(model)
    return script, model.args, torch_agent(model, script, device)


def evaluate(
    agent,
    make_env,
    episode_statistics,
    env_id: str,
    eval_episodes: int = 10,
    seed: int = 1,
    device: str | torch.device = "cpu",
    video_dir: str | Path | None = None,
) -> list[float]:
    """Play `eval_episodes` whole games in one env, sampling actions from the policy.

    `make_env` builds the env as in training (`with_training_env`: under the same protocol), and
    each game's score is its real, unclipped score over all lives. A recurrent
    agent's state starts at zero and is zeroed where an episode ended, as in training. `seed`
    seeds the env and the action sampling (the caller's torch RNG state is left as it was), so
    the same model and seed give the same games. With `video_dir`, every game is written to
    `video_dir/eval-episode-{i}.mp4`, from the game's first frame to its last (with same-step
    autoreset the frame after a game's last step already shows the next game: it is left out).
    """
    device = torch.device(device)
    render = {"render_mode": "rgb_array"} if video_dir is not None else {}
    envs = make_env(env_id, 1, seed, **render)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            policy = torch_policy(agent, device)
            stats = episode_statistics(1)
            return play_games(envs, policy, stats.update, eval_episodes, video_dir)
    finally:
        envs.close()


def torch_policy(agent, device):
    """`play_games`'s policy for a torch agent: actions sampled without gradients; a recurrent
    agent's state starts at zero and is zeroed where an episode ended, as in training."""
    recurrent = hasattr(agent, "initial_state")
    state = agent.initial_state(1, device) if recurrent else None

    def policy(obs, done):
        nonlocal state
        with torch.no_grad():
            obs = torch.from_numpy(obs).to(device)
            if recurrent:
                done_t = torch.from_numpy(done).float().to(device)
                action, *_, state = agent.get_action_and_value(obs, state, done_t)
            else:
                action = agent.get_action_and_value(obs)[0]
        return action.cpu().numpy()

    return policy


def evaluate_model(model: Model, args) -> list[float]:
    """Plays `args.eval_episodes` games (an `EvalArgs`) with a model as `read_model` returns it,
    torch or JAX, prints each game and the summary, and returns the scores."""
    script = model_script(model)
    print(f"{model.path}: {model.script} on {model.args['env_id']} ({model.source})")
    video_dir = evaluation_video_dir(model, args.video_dir) if args.capture_video else None
    try:
        episodic_returns = play_model(model, script, args, video_dir)
    except OSError as exc:
        if video_dir is None or exc.errno not in WRITE_ERRORS:
            raise
        fail(f"--capture-video: cannot write the videos in {video_dir}/: {cause(exc)}", DISK_EXIT)
    print(summary(model.args["env_id"], episodic_returns))
    if video_dir is not None:
        print(f"videos: {video_dir}/")
    return episodic_returns


def play_model(model: Model, script, args, video_dir: Path | None) -> list[float]:
    if model.framework == "jax":
        from cleanrl_utils.evals import jax_eval

        episodic_returns = jax_eval.evaluate_model(model, script, args, video_dir)
    else:
        make_env, seed = evaluation_games(model, script, args)
        device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
        episodic_returns = evaluate(
            torch_agent(model, script, device),
            make_env,
            script.EpisodeStatistics,
            env_id=model.args["env_id"],
            eval_episodes=args.eval_episodes,
            seed=seed,
            device=device,
            video_dir=video_dir,
        )
    return episodic_returns


@entry_point()
def main(argv=None):
    """`python -m cleanrl_utils.evals`: any model file or checkpoint, torch or JAX."""
    args = parse_eval_args(argv)
    return evaluate_model(read_model(args.model_path), args)
