"""The run's lifecycle after its training loop: the model file, the evaluation games and the
upload, with `--save-model`, `--capture-video` and `--upload-model`, which the scripts call
after the loop (`save_and_evaluate`; what an upload needs is checked by `Run`, before any work,
with `cleanrl_utils.checks.hub`). The top floor, above `run`:
it calls the evaluators (`cleanrl_utils.evals`) and the Hub (`cleanrl_utils.huggingface`), which
import nothing of it."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from cleanrl_utils.console.errors import DISK_EXIT, RunError, fail
from cleanrl_utils.console.output import cause
from cleanrl_utils.envs import protocols
from cleanrl_utils.envs.video import WRITE_ERRORS, run_videos
from cleanrl_utils.evals import evaluate, jax_eval
from cleanrl_utils.evals.common import evaluation_seed, with_training_env
from cleanrl_utils.files.model_file import save_jax_model, save_torch_model
from cleanrl_utils.files.state_file import list_checkpoints
from cleanrl_utils.huggingface.push import PushError, push_run, retry_command
from cleanrl_utils.run import checkpoints
from cleanrl_utils.run.folder_guard import kept_after


def save_and_evaluate(run, agent, make_env, episode_statistics, device="cpu", params=None):
    """What a script does after training (`finish_training`) with its agent: a torch module, or
    with `params` (the JAX scripts) a JAX agent and its parameters."""
    args = run.args

    def save(path):
        if params is None:
            save_torch_model(path, agent, args, run.script_file)
        else:
            save_jax_model(path, params, args, run.script_file)

    def play(**games):
        envs = with_training_env(make_env, args)
        if params is None:
            return evaluate(agent, envs, episode_statistics, device=device, **games)
        return jax_eval.evaluate(agent, params, envs, episode_statistics, **games)

    finish_training(run, save, play)


def finish_training(run, save, evaluate) -> None:
    """What a script does after training, with its own `save(path)` (writes the model file) and
    `evaluate(env_id=, eval_episodes=, seed=, video_dir=)` (plays the games, returns their
    scores): with `--save-model`, writes `{run.dir}/{exp_name}.cleanrl_model`; with
    `--save-model` or `--capture-video`, plays `--eval-episodes` games under the run's protocol
    with a new seed (`evaluation_seed`: `seed + 1`, which the evaluator takes by default),
    recorded under `videos/{run.name}/` with `--capture-video` (a line on stdout says where),
    and logs each game's score as `eval/episodic_return` at the run's last step; with `--upload-model` (which implies both),
    then pushes the run to the Hugging Face Hub (`push_after_training`). Nothing after a stop
    signal: the run is not over."""
    args = run.args
    upload = getattr(args, "upload_model", False)
    if run.stop_requested or not (args.save_model or args.capture_video or upload):
        return
    if args.save_model or upload:
        try:
            save(run.dir / f"{args.exp_name}.cleanrl_model")
        except OSError as exc:
            checkpoints.disk_failed(run, "the model file", exc)
    video_dir = str(run_videos(run.name)) if args.capture_video or upload else None
    seed, protocol = evaluation_seed(args.seed), protocols.record(args)
    under = f", under {protocols.describe(protocol)}" if protocol else ""
    print(f"evaluating on {args.eval_episodes} games (--eval-episodes), seed {seed}{under}")
    try:
        episodic_returns = evaluate(
            env_id=args.env_id,
            eval_episodes=args.eval_episodes,
            seed=seed,
            video_dir=video_dir,
        )
    except OSError as exc:
        if video_dir is None or exc.errno not in WRITE_ERRORS:
            raise
        videos_failed(run, video_dir, exc)
    for episodic_return in episodic_returns:  # (the games of the model of the run's last step)
        run.writer.add_scalar("eval/episodic_return", episodic_return, run.global_step)
    if video_dir is not None:  # (the run folder's line, which follows, does not hold them)
        print(f"videos: {video_dir}/ ({videos_held(video_dir, len(episodic_returns))})")
    if upload:
        push_after_training(run, episodic_returns, video_dir)


def videos_failed(run, video_dir: str, exc: OSError) -> NoReturn:
    """The evaluation's videos could not be written (a full disk): one line and exit code
    `DISK_EXIT`. The run is not recorded finished, so that its resume, once there is room, does
    the steps after training again: its training is all in its checkpoint."""
    kept = kept_after(run.dir, exc, list_checkpoints(run.dir), run.resume_command())
    flag = "--capture-video" if run.args.capture_video else "--upload-model"
    raise RunError(
        f"{flag}: cannot write the evaluation's videos in {video_dir}/: {cause(exc)}; the "
        f"training is done and {kept}",
        DISK_EXIT,
    )


def videos_held(video_dir: str, evaluation_games: int) -> str:
    """What a run's videos folder holds, as its last lines say: the evaluation games, and the
    training games of env 0 that `ppo_atari.py` records beside them (`RecordGames`)."""

    def games(n: int, what: str, name: str) -> str:
        return f"{n} {what} game{'s' if n != 1 else ''}: {name}-episode-N.mp4"

    held = [games(evaluation_games, "evaluation", "eval")]
    if trained := len(list(Path(video_dir).glob("train-episode-*.mp4"))):
        held.append(games(trained, "training", "train"))
    return ", ".join(held)


def push_after_training(run, episodic_returns: list[float], video_dir: str | None) -> None:
    """`--upload-model`: pushes the finished run. A failure of the Hub (`PushError`) closes the
    run (its model and logs stay on disk) and exits with one line that says how to push it
    again."""
    run.writer.flush()  # the event file holds the evaluation
    entity = run.args.hf_entity
    try:
        url = push_run(run.dir, entity, episodic_returns, video_dir)
    except PushError as exc:
        run.finish()
        fail(
            f"{exc}; the run is kept in {run.dir}: push it with `{retry_command(run.dir, entity)}`",
            exc.code,
        )
    print(f"pushed to {url}")
