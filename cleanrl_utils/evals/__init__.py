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

A saved `.cleanrl_model` file names its script, so
`python -m cleanrl_utils.evals --model-path runs/RUN/EXP.cleanrl_model` needs nothing else.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from cleanrl_utils.checks import fail
from cleanrl_utils.evals.common import game_over, parse_eval_args, summary
from cleanrl_utils.runs import atomic_write_bytes
from cleanrl_utils.scripts import load_script


def save_model(path: str | Path, agent, args, script_file: str) -> None:
    """`--save-model`'s file: the training script's module name and path, its arguments and the
    agent's weights, in one `torch.save` file written atomically."""
    buffer = io.BytesIO()
    torch.save(
        {
            "script": f"cleanrl.{Path(script_file).stem}",
            "script_path": str(Path(script_file).resolve()),
            "args": dataclasses.asdict(args),
            "model_state_dict": agent.state_dict(),
        },
        buffer,
    )
    atomic_write_bytes(path, buffer.getvalue())
    print(f"model saved to {path}")


def save_and_evaluate(run, agent, make_env, episode_statistics, device="cpu") -> None:
    """What a script does after training: with `--save-model`, writes the model to
    `{run.dir}/{exp_name}.cleanrl_model`; with `--save-model` or `--capture-video`, plays
    `--eval-episodes` games with a new seed (`seed + 1`), recorded under `videos/{run.name}/` with
    `--capture-video`, and logs each game's score as `eval/episodic_return`. Nothing after a stop
    signal: the run is not over."""
    args = run.args
    if run.stop_requested or not (args.save_model or args.capture_video):
        return
    if args.save_model:
        save_model(run.dir / f"{args.exp_name}.cleanrl_model", agent, args, run.script_file)
    print(f"evaluating on {args.eval_episodes} games (--eval-episodes), seed {args.seed + 1}")
    episodic_returns = evaluate(
        agent,
        make_env,
        episode_statistics,
        env_id=args.env_id,
        eval_episodes=args.eval_episodes,
        seed=args.seed + 1,
        device=device,
        video_dir=f"videos/{run.name}" if args.capture_video else None,
    )
    for idx, episodic_return in enumerate(episodic_returns):
        run.writer.add_scalar("eval/episodic_return", episodic_return, idx)


def load_model(model_path: str | Path, device: str | torch.device = "cpu"):
    """Returns (script module, training args dict, agent in eval mode); exits 2 on a bad file."""
    model_path = Path(model_path)
    if not model_path.is_file():
        fail(f"model file not found: {model_path}")
    try:
        checkpoint = torch.load(model_path, map_location=device, weights_only=False)
        script = load_script(checkpoint["script"])
        args = checkpoint["args"]
    except Exception as e:  # a truncated or foreign file: say which, without a traceback
        fail(f"cannot read model file {model_path}: {type(e).__name__}: {e}")
    envs = script.make_env(args["env_id"], 1, args["seed"])
    agent = script.Agent(envs).to(device)
    envs.close()
    agent.load_state_dict(checkpoint["model_state_dict"])
    agent.eval()
    return script, args, agent


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

    The env is built exactly as in training (a lost life ends the training episode and the env
    presses FIRE), and each game's score is its real, unclipped score over all lives. A recurrent
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
            return play(agent, envs, episode_statistics(1), eval_episodes, device, video_dir)
    finally:
        envs.close()


def play(agent, envs, stats, eval_episodes, device, video_dir) -> list[float]:
    from cleanrl_utils.video import VideoWriter

    same_step = envs.metadata.get("autoreset_mode") == AutoresetMode.SAME_STEP
    recurrent = hasattr(agent, "initial_state")
    state = agent.initial_state(1, device) if recurrent else None
    obs, _ = envs.reset()
    done = np.zeros(1, dtype=bool)
    episodic_returns = []
    video = None
    while len(episodic_returns) < eval_episodes:
        if video_dir is not None and video is None:
            video = VideoWriter(Path(video_dir) / f"eval-episode-{len(episodic_returns)}.mp4")
            if same_step or not done.any():  # (else the env still shows the last game's end)
                video.append(envs.render()[0])
        with torch.no_grad():
            obs = torch.from_numpy(obs).to(device)
            if recurrent:
                done_t = torch.from_numpy(done).float().to(device)
                action, *_, state = agent.get_action_and_value(obs, state, done_t)
            else:
                action = agent.get_action_and_value(obs)[0]
        acted = np.ones(1, dtype=bool) if same_step else ~done
        obs, _, terminated, truncated, info = envs.step(action.cpu().numpy())
        done = terminated | truncated
        if video is not None and not (same_step and done.any()):
            video.append(envs.render()[0])
        for episodic_return, episodic_length in stats.update(info, truncated, acted):
            video = game_over(episodic_returns, episodic_return, episodic_length, video)
    return episodic_returns


def main(argv=None):
    args = parse_eval_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    script, train_args, agent = load_model(args.model_path, device)
    episodic_returns = evaluate(
        agent,
        script.make_env,
        script.EpisodeStatistics,
        env_id=train_args["env_id"],
        eval_episodes=args.eval_episodes,
        seed=args.seed,
        device=device,
        video_dir=args.video_dir if args.capture_video else None,
    )
    print(summary(train_args["env_id"], episodic_returns))
    return episodic_returns
