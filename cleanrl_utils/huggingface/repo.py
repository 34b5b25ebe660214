"""The Hub repository of a run: the folder that is pushed, built from the run folder.

README.md                  the model card: the Hub's metadata (library, tags, the evaluation
                           result), the command line, the hyperparameters, the learning
                           curve and how to replay the agent
{exp_name}.cleanrl_model   the model (`cleanrl_utils.files.model_file`: safetensors or flax
                           msgpack, with the script's name and arguments)
args.json                  {"script", "model", "args", "command", "git"}: what `enjoy` reads
                           first, and the run's arguments as JSON
events.out.tfevents.*      the run's TensorBoard event files
learning_curve.png         the report tool's learning curve of the run
videos/eval-episode-*.mp4  the evaluation games (when they were recorded)
replay.mp4                 the first evaluation game, shown on the model's page
{script}.py                the training script
requirements.txt           the packages installed when the run was pushed, pinned, of the
                           project's requirement files for the script's family
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shlex
import shutil
import time
from pathlib import Path

import numpy as np

from cleanrl_utils.console.errors import fail
from cleanrl_utils.envs import protocols
from cleanrl_utils.files.config import REPO_ROOT, hyperparameter_table
from cleanrl_utils.files.model_file import Model, read_model
from cleanrl_utils.report.events import event_files, read_event_file
from cleanrl_utils.report.tables import plural

EVAL_TAG = "eval/episodic_return"
CURVE = "learning_curve.png"
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==")


# the arguments a push reads from config.json: the repository's name, the model file's
NEEDED_ARGS = (
    ("env_id", str, "a string"),
    ("exp_name", str, "a string"),
    ("seed", int, "an integer"),
)


def run_config(run_dir: Path) -> dict:
    """The run's config.json, with what a push reads from it checked: one `error:` line naming
    the file and what is wrong, not a traceback at the first use."""
    try:
        config = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError) as exc:
        fail(f"{run_dir} is not a run folder: no readable config.json ({exc})")
    if not isinstance(config, dict) or not isinstance(config.get("args"), dict):
        fail(f"{run_dir}/config.json holds no arguments")
    args = config["args"]
    for key, kind, what in NEEDED_ARGS:
        if key not in args:
            fail(
                f"{run_dir}/config.json: its arguments have no `{key}` (the repository's name needs it)"
            )
        if not isinstance(args[key], kind) or isinstance(args[key], bool):
            fail(f"{run_dir}/config.json: its `{key}` is {args[key]!r}, not {what}")
    for key, kind, what in (("command", list, "a list"), ("resumes", list, "a list")):
        if config.get(key) is not None and not isinstance(config[key], kind):
            fail(f"{run_dir}/config.json: its `{key}` is {config[key]!r:.60}, not {what}")
    return config


def evaluation_returns(run_dir: Path) -> list[float]:
    """The scores of the run's final evaluation games, as its event files logged them."""
    returns: list[float] = []
    for file in event_files(run_dir):
        points = read_event_file(file, (EVAL_TAG,)).scalars[EVAL_TAG]
        if points:  # the last file that has them (a resumed run evaluates once, at its end)
            returns = [value for _, _, value in sorted(points)]
    return returns


def run_model(run_dir: Path, config: dict) -> Model:
    path = run_dir / f"{config['args']['exp_name']}.cleanrl_model"
    if not path.is_file():
        fail(
            f"{run_dir} holds no model ({path.name}): only a run trained with --save-model or "
            "--upload-model can be pushed"
        )
    return read_model(path)


def script_source(script: str) -> Path:
    spec = importlib.util.find_spec(f"cleanrl.{script}")
    if spec is None or spec.origin is None:
        fail(f"the model was trained by {script}.py, which is not in cleanrl/")
    return Path(spec.origin)


def requirement_files(source: str) -> list[str]:
    """The project's requirement files of a script (by the libraries it imports), and the hub
    extra's (the download, the videos and the plots)."""
    if re.search(r"^import jax$", source, re.M):
        family = "jax"
    elif re.search(r"^import envpool$", source, re.M):
        family = "envpool"
    else:
        family = "atari"
    return [f"requirements-{family}.txt", "requirements-hub.txt"]


def pinned_requirements(names: list[str], folder: Path = REPO_ROOT / "requirements") -> str:
    """The packages pinned in the requirement files `names` (and the files they include), each
    at the version installed now (or its pin, when it is not installed)."""
    seen: dict[str, str] = {}

    def read(name: str) -> None:
        for line in (folder / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line.startswith("-r "):
                read(line[3:].strip())
            elif (match := REQUIREMENT.match(line)) and match[1].lower() not in seen:
                try:
                    seen[match[1].lower()] = f"{match[1]}=={importlib.metadata.version(match[1])}"
                except importlib.metadata.PackageNotFoundError:
                    seen[match[1].lower()] = line

    for name in names:
        read(name)
    header = (
        "# The packages installed when this run was pushed, of those pinned in the project's "
        f"requirements/{' and requirements/'.join(names)}\n"
    )
    return header + "".join(f"{line}\n" for line in seen.values())


def plot_curve(run_dir: Path, path: Path) -> str | None:
    """The report tool's learning curve of the run; why there is none, if there is none."""
    from cleanrl_utils.report.cells import Report
    from cleanrl_utils.report.loading import load_run
    from cleanrl_utils.report.options import Args as ReportArgs
    from cleanrl_utils.report.plots import plot_set

    log = load_run(run_dir, running_minutes=0.0, now=time.time())
    report = Report(ReportArgs(include_unfinished=True), [log], [])
    if not report.cells:
        return f"no learning curve: {'; '.join(log.problems) or 'the run cannot be read'}"
    plot_set(report, [log.script], [log.env_id], path, wall_clock=False)
    return None if len(log.returns) else "the learning curve is empty: no game ended in training"


def command_line(config: dict) -> str:
    command = config.get("command") or []
    if not command or not all(isinstance(word, str) for word in command):
        return "(not recorded)"
    # (config.json records sys.argv: the script's path as it was typed, maybe absolute)
    return f"python cleanrl/{shlex.join([Path(command[0]).name, *command[1:]])}"


def model_card(repo_id: str, model: Model, config: dict, returns: list[float], notes) -> str:
    from huggingface_hub import EvalResult, ModelCardData

    args, env_id = model.args, model.args["env_id"]
    result = f"{np.mean(returns):.2f} +/- {np.std(returns):.2f}"
    # (a model file of before the protocol was recorded: its arguments say what they can)
    protocol = model.protocol or protocols.record(args, model.script)
    data = ModelCardData(
        library_name="cleanrl",
        tags=[
            env_id,
            "deep-reinforcement-learning",
            "reinforcement-learning",
            "custom-implementation",
            *([f"protocol-{protocol['name']}"] if protocol else []),
        ],
        model_name="PPO",
        eval_results=[
            EvalResult(
                task_type="reinforcement-learning",
                task_name="reinforcement-learning",
                dataset_type=env_id,
                dataset_name=env_id,
                metric_type="mean_reward",
                metric_name="mean_reward",
                metric_value=result,
            )
        ],
    )
    resumed = len(config.get("resumes", []))
    if resumed:
        notes = [*notes, f"the run was resumed from its checkpoints ({plural(resumed, 'time')})"]
    steps = args.get("num_iterations", 0) * args.get("batch_size", 0)
    file_format = "safetensors" if model.framework == "torch" else "flax msgpack"
    notes = "## Notes\n\n" + "".join(f"- {note}\n" for note in notes) if notes else ""
    return f"""---
{data.to_yaml()}
---

# PPO playing {env_id}

A PPO agent trained on `{env_id}` by `{model.script}.py` of CleanRL's PPO for Atari: seed
{args["seed"]}, {steps:,} env steps{f", under {protocols.describe(protocol)}" if protocol else ""}.

Evaluation: mean episodic return **{result}** over {plural(len(returns), "game")} (the real game score over
all lives; games seeded with seed + 1 = {args["seed"] + 1}): {", ".join(f"{r:g}" for r in returns)}.

## Replay it

With the project installed (its `hub` extra), this downloads the model and plays its games:

```bash
python -m cleanrl_utils.enjoy --hf-repo {repo_id} --capture-video
```

The model loads without running any code (`{model.path.name}` is a {file_format} file, with
the script's name and arguments); `requirements.txt` pins the packages the run was pushed with.

## Command line

```bash
{command_line(config)}
```

## Learning curve

![learning curve]({CURVE})

## Hyperparameters

{hyperparameter_table(args)}

## Files

| file | what |
|---|---|
| `{model.path.name}` | the model |
| `args.json` | the script, the model file, the arguments, the command line, the code version |
| `events.out.tfevents.*` | the TensorBoard log of the run |
| `{CURVE}` | the learning curve (episodic return against env steps) |
| `videos/`, `replay.mp4` | the evaluation games (`replay.mp4`: the first one) |
| `{model.script}.py` | the training script |
| `requirements.txt` | the packages, pinned |

{notes}"""


def build_repo_folder(
    run_dir: str | Path,
    folder: str | Path,
    repo_id: str,
    episodic_returns: list[float] | None = None,
    video_dir: str | Path | None = None,
) -> Path:
    """Writes the repository folder of the run in `run_dir` into `folder` (see the module's
    docstring). `episodic_returns`: the evaluation's scores (default: read from the event files);
    `video_dir`: its videos (default: `videos/{run name}` beside the run's `runs/` folder).
    Exits 2 with one `error:` line when the run cannot be pushed (no model, no evaluation)."""
    run_dir, folder = Path(run_dir), Path(folder)
    config = run_config(run_dir)
    model = run_model(run_dir, config)
    if episodic_returns is None:
        episodic_returns = evaluation_returns(run_dir)
    if not episodic_returns:
        fail(f"{run_dir} has no evaluation ({EVAL_TAG} in its TensorBoard log)")
    if video_dir is None:
        video_dir = run_dir.resolve().parent.parent / "videos" / run_dir.name
    folder.mkdir(parents=True, exist_ok=True)
    notes = []

    shutil.copyfile(model.path, folder / model.path.name)
    info = {
        "script": model.script,
        "model": model.path.name,
        "args": model.args,
        "command": config.get("command"),
        "git": config.get("git"),
    }
    (folder / "args.json").write_text(json.dumps(info, indent=2) + "\n")
    for file in event_files(run_dir):
        shutil.copyfile(file, folder / file.name)
    videos = sorted(Path(video_dir).glob("eval-episode-*.mp4"), key=lambda p: int(p.stem[13:]))
    if videos:
        (folder / "videos").mkdir(exist_ok=True)
        for video in videos:
            shutil.copyfile(video, folder / "videos" / video.name)
        shutil.copyfile(videos[0], folder / "replay.mp4")
    else:
        notes.append(f"no video: none in {video_dir} (the games were not recorded)")
    source = script_source(model.script)
    shutil.copyfile(source, folder / source.name)
    text = source.read_text()
    (folder / "requirements.txt").write_text(pinned_requirements(requirement_files(text)))
    problem = plot_curve(run_dir, folder / CURVE)
    if problem:
        notes.append(problem)
    card = model_card(repo_id, model, config, [float(r) for r in episodic_returns], notes)
    (folder / "README.md").write_text(card)
    return folder
