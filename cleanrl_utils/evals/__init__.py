"""Evaluate a trained agent: play whole games, return their real scores, optionally record them.

One entry point for the torch scripts in cleanrl/. A script provides `make_env(env_id, num_envs,
seed, **kwargs)`, `EpisodeStatistics(num_envs)` and `Agent(envs)` with
`get_action_and_value(obs)`; a saved `.cleanrl_model` file names its script, so
`python -m cleanrl_utils.evals --model-path runs/RUN/EXP.cleanrl_model` needs nothing else.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

from cleanrl_utils.checks import fail


def load_script(name: str, path: str | None = None):
    """Import the training script a checkpoint came from (by module name, else by file path)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        if path is None or not Path(path).is_file():
            raise
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_model(model_path: str | Path, device: str | torch.device = "cpu"):
    """Returns (script module, training args dict, agent in eval mode); exits 2 on a bad file."""
    model_path = Path(model_path)
    if not model_path.is_file():
        fail(f"model file not found: {model_path}")
    try:
        checkpoint = torch.load(model_path, map_location=device, weights_only=False)
        script = load_script(checkpoint["script"], checkpoint.get("script_path"))
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
    presses FIRE), and each game's score is its real, unclipped score over all lives. With
    `video_dir`, every game is written to `video_dir/eval-episode-{i}.mp4`.
    """
    from cleanrl_utils.video import VideoWriter

    render = {"render_mode": "rgb_array"} if video_dir is not None else {}
    envs = make_env(env_id, 1, seed, **render)
    stats = episode_statistics(1)
    obs, _ = envs.reset()
    acted = np.ones(1, dtype=bool)
    episodic_returns = []
    video = None
    while len(episodic_returns) < eval_episodes:
        if video_dir is not None and video is None:
            video = VideoWriter(Path(video_dir) / f"eval-episode-{len(episodic_returns)}.mp4")
            video.append(envs.render()[0])
        with torch.no_grad():
            action = agent.get_action_and_value(torch.from_numpy(obs).to(device))[0]
        obs, _, terminated, truncated, info = envs.step(action.cpu().numpy())
        if video is not None:
            video.append(envs.render()[0])
        finished = stats.update(info, truncated, acted)
        acted = ~(terminated | truncated)
        for episodic_return, episodic_length in finished:
            print(
                f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}, "
                f"episodic_length={episodic_length}"
            )
            episodic_returns.append(episodic_return)
            if video is not None:
                log_video(video.close())
                video = None
    envs.close()
    return episodic_returns


def log_video(path: Path) -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.log({"eval/video": wandb.Video(str(path), format="mp4")})


def main(argv=None):
    from dataclasses import dataclass

    import tyro

    @dataclass
    class EvalArgs:
        model_path: str
        """a `.cleanrl_model` file written by a script's `--save-model`"""
        eval_episodes: int = 10
        """the number of games to play"""
        seed: int = 1
        """seed of the evaluation environment"""
        capture_video: bool = False
        """whether to record every game under `--video-dir`"""
        video_dir: str = "videos/eval"
        """where the videos go"""
        cuda: bool = True
        """use a GPU when there is one"""

    args = tyro.cli(EvalArgs, args=argv)
    if args.eval_episodes <= 0:
        fail(f"--eval-episodes must be positive, got {args.eval_episodes}")
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
    print(
        f"{train_args['env_id']}: mean episodic_return={np.mean(episodic_returns):.2f} "
        f"+- {np.std(episodic_returns):.2f} over {len(episodic_returns)} games"
    )
    return episodic_returns
