"""What the torch evaluation (`cleanrl_utils.evals`) and the JAX one (`.jax_eval`) share: the
loop that plays the games (`play_games`, each backend passes its policy), the command line and
how a finished game is reported. Model files are `cleanrl_utils.files.model_file`; what a script does
after training is the lifecycle's (`cleanrl_utils.after_training`)."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.checks.paths import check_output_folder
from cleanrl_utils.console.errors import fail
from cleanrl_utils.envs import protocols
from cleanrl_utils.files.run_names import RunName, file_env_id


def play_games(envs, policy, finished_games, eval_episodes: int, video_dir) -> list[float]:
    """Play `eval_episodes` whole games in `envs` (one env), print each game, write each to
    `video_dir/eval-episode-{i}.mp4` when `video_dir` is given, and return the games' scores.
    The backend passes its agent as two functions:

    - `policy(obs, done)`: the actions (a NumPy array) for `obs`; `done[i]` is True where env i's
      episode ended in the step before (a recurrent agent zeroes its state there);
    - `finished_games(info, truncated, acted)`: the (return, length) of each game that ended in
      this step; `acted[i]` is False where env i ignored this step's action (only ever the step
      after a done, with next-step autoreset).

    When an env resets is `envs.metadata["autoreset_mode"]`: on the step after a done, ignoring
    its action (EnvPool; gymnasium's `NEXT_STEP`, also assumed when the key is missing), or in
    the same step (`SAME_STEP`). A video runs from the game's first frame to its last: the frame
    that still shows the last game's end (next step), or already the next game (same step), is
    left out.
    """
    from gymnasium.vector import AutoresetMode

    from cleanrl_utils.envs.video import VideoWriter

    same_step = envs.metadata.get("autoreset_mode") == AutoresetMode.SAME_STEP
    obs, _ = envs.reset()
    done = np.zeros(1, dtype=bool)
    episodic_returns = []
    video = None
    while len(episodic_returns) < eval_episodes:
        if video_dir is not None and video is None:
            video = VideoWriter(Path(video_dir) / f"eval-episode-{len(episodic_returns)}.mp4")
            if same_step or not done.any():  # (else the env still shows the last game's end)
                video.append(envs.render()[0])
        action = policy(obs, done)
        acted = np.ones(1, dtype=bool) if same_step else ~done
        obs, _, terminated, truncated, info = envs.step(action)
        done = terminated | truncated
        if video is not None and not (same_step and done.any()):
            video.append(envs.render()[0])
        for episodic_return, episodic_length in finished_games(info, truncated, acted):
            video = game_over(episodic_returns, episodic_return, episodic_length, video)
    return episodic_returns


def game_over(episodic_returns: list[float], episodic_return: float, episodic_length: int, video):
    """Record a finished game: print it, keep its score, close its video. Returns None (the
    caller's next video)."""
    print(
        f"eval_episode={len(episodic_returns)}, episodic_return={episodic_return}, "
        f"episodic_length={episodic_length}"
    )
    episodic_returns.append(episodic_return)
    if video is not None:
        path = video.close()
        wandb = sys.modules.get("wandb")
        if wandb is not None and wandb.run is not None:
            wandb.log({"eval/video": wandb.Video(str(path), format="mp4")})
    return None


def with_training_env(make_env, args, script: str | None = None):
    """The script's `make_env` with the protocol's settings the run was trained with
    (`cleanrl_utils.envs.protocols`): an evaluation plays the games the agent was trained on. `args`:
    the run's arguments, a dataclass or a dict read from a file (`script`: the name of its
    script, whose published settings stand for those an older file lacks)."""
    return with_protocol(make_env, protocols.settings(args, script))


def with_protocol(make_env, protocol: dict):
    """The script's `make_env` with the settings of `protocol` (a `protocols.record`)."""
    options = {name: protocol[name] for name in protocols.SETTINGS if name in protocol}
    return functools.partial(make_env, **options) if options else make_env


def evaluation_seed(seed: int) -> int:
    """The seed of a run's own evaluation, after training: new games, not its first ones."""
    return seed + 1


def model_protocol(model) -> dict:
    """The protocol a model was trained under: as its file records it, or (a checkpoint, a file
    of an older version) as its arguments say."""
    return model.protocol or protocols.record(model.args, model.script) or {}


def evaluation_games(model, script, args):
    """The games an evaluation (`EvalArgs`) of `model` plays: the script's `make_env` with the
    settings of the protocol it was trained under, or of `--protocol`, and the seed, that of the
    run's own evaluation unless `--seed` is given; both said in one line. Exits 2 with one
    `error:` line when `--protocol` plays another action set than the network's."""
    trained = model_protocol(model)
    protocol, said = trained, "the one it was trained with"
    if args.protocol is not None:
        protocol = {"name": args.protocol, **protocols.named(args.protocol, script.Args)}
        said = f"--protocol; it was trained under {trained.get('name', 'published')}"
        full = protocol["full_action_space"]
        if trained and full != trained["full_action_space"]:
            fail(
                f"--protocol {args.protocol} plays the {'full' if full else 'minimal'} action set, "
                f"{model.path} was trained on the {'minimal' if full else 'full'} one: its network "
                "cannot choose among those actions"
            )
    seed, seed_said = args.seed, "--seed"
    if seed is None:
        seed, seed_said = evaluation_seed(model.args["seed"]), "the run's own evaluation's"
    print(f"games with seed {seed} ({seed_said}), under {protocols.describe(protocol)} ({said})")
    return with_protocol(script.make_env, protocol), seed


@dataclass
class EvalArgs:
    """Play a trained agent's games: a model file of any script in cleanrl/, or a checkpoint."""

    model_path: str
    """a `.cleanrl_model` file written by a script's `--save-model`, or a checkpoint (`checkpoint_*.ckpt`: the weights of its iteration)"""
    eval_episodes: int = 10
    """the number of games to play"""
    seed: int | None = None
    """seed of the evaluation environment and of the sampled actions (default: the one the run's own evaluation used, its seed + 1: the same games)"""
    protocol: str | None = None
    """play under `published` or `machado` settings (docs/protocols.md; the action set must be the network's); default: the protocol the model was trained with"""
    capture_video: bool = False
    """whether to record every game, in a new folder under `--video-dir` named after the model's run"""
    video_dir: str = "videos/eval"
    """where the videos go: one folder per evaluation inside it"""
    cuda: bool = True
    """use a GPU when there is one (for JAX: when a GPU build of jaxlib is installed)"""


def parse_eval_args(argv=None, prog: str = "python -m cleanrl_utils.evals", cls=EvalArgs):
    args = parse_args(cls, argv, prog=prog)  # (a bad command line: one `error:` line)
    if args.eval_episodes <= 0:
        fail(f"--eval-episodes must be positive, got {args.eval_episodes}")
    if args.protocol is not None and args.protocol not in protocols.NAMES:
        fail(f"--protocol {args.protocol!r} is not a protocol: one of {', '.join(protocols.NAMES)}")
    if args.capture_video:  # (before the model is read: `--video-dir` a file, exit code 74)
        check_output_folder(args.video_dir, "--video-dir")
    return args


def evaluation_video_dir(model, video_dir: str | Path) -> Path:
    """A new folder under `video_dir` for one evaluation's videos, so that the videos of two
    models, or of two evaluations of one, never mix: named after the model's run (the name of
    the run folder its file is in; `{env_id}__{script}__{seed}` for a file outside one), then
    `-2`, `-3`, ... when an earlier evaluation took that name. `model`: as `read_model` returns
    it."""
    folder = Path(model.path).resolve().parent.name
    if RunName.parse(folder) is None:
        folder = f"{file_env_id(model.args['env_id'])}__{model.script}__{model.args.get('seed', 1)}"
    path, n = Path(video_dir) / folder, 1
    while path.exists():
        n += 1
        path = Path(video_dir) / f"{folder}-{n}"
    return path


def summary(env_id: str, episodic_returns: list[float]) -> str:
    return (
        f"{env_id}: mean episodic_return={np.mean(episodic_returns):.2f} "
        f"+- {np.std(episodic_returns):.2f} over {len(episodic_returns)} games"
    )
