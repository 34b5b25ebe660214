"""Sharing agents on the Hugging Face Hub (`cleanrl_utils.huggingface`, `cleanrl_utils.enjoy`):
real short runs of a torch and a JAX script with `--upload-model`, pushed through the real
`huggingface_hub` client to a small Hub on the loopback (`hub_server.LoopbackHub`, pointed at
with `HF_ENDPOINT`), then replayed from it with `enjoy`.

- what arrived is every file of the repository folder, equal to the folder built again from the
  run folder (`python -m cleanrl_utils.huggingface RUN --dry-run`), in one commit; the model card
  parses with `huggingface_hub`'s own readers and its evaluation result is the evaluation's;
- `enjoy --hf-repo` plays the same games as the training run's own evaluation (same seed), and
  so does the evaluator on the run's last checkpoint;
- a push the Hub refuses (401) is one line with exit code 2 that says how to push again, the
  run is kept, and that command then pushes it; a 5xx is retried; a missing token is refused
  before training.

The runs start together, once per module, and are shared by the tests that read them.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from checks_testing import SCRIPT_CHECKS, script_args
from hub_server import LoopbackHub
from logs_testing import read_scalars
from scripts_testing import (
    REPO_ROOT,
    ScriptProcess,
    assert_usage_error,
    describe,
    finish_script,
    module_runs,
    run_script,
    script_env,
    start_script,
)

from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.run import Run

pytest.importorskip("huggingface_hub")

# jax_eval and the JAX script fork from a process that may run JAX's threads; they exec at once
pytestmark = [
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
    pytest.mark.xdist_group(__name__),
]

TINY = "--num-envs 2 --num-steps 16 --num-minibatches 2 --update-epochs 1 --total-timesteps 64"
UPLOAD = f"{TINY} --eval-episodes 1 --upload-model".split()
WRONG_TOKEN = "hf_not_the_right_one"
GAME = re.compile(r"^eval_episode=(\d+), episodic_return=([\d.]+)", re.M)


def script(name: str) -> Path:
    return REPO_ROOT / "cleanrl" / f"{name}.py"


@pytest.fixture(scope="module")
def hub():
    with LoopbackHub() as served:
        yield served


def hub_env(hub: LoopbackHub, cwd: Path, token: str | None = None) -> dict[str, str]:
    """A process pointed at the loopback Hub, with its own huggingface_hub cache."""
    return {**hub.env(token), "HF_HOME": str(Path(cwd) / ".hf")}


@pytest.fixture(scope="module")
def training_runs(request, tmp_path_factory, hub):
    runs = {
        "torch_run": (script("ppo_atari_envpool"), ["--env-id", "Breakout-v5", *UPLOAD], hub.env()),
        "jax_run": (
            script("ppo_atari_envpool_xla_jax_scan"),
            ["--env-id", "Breakout-v5", *UPLOAD],
            hub.env(),
        ),
        # the gymnasium family, with a token the Hub refuses
        "refused_run": (
            script("ppo_atari"),
            ["--env-id", "BreakoutNoFrameskip-v4", *UPLOAD],
            hub.env(WRONG_TOKEN),
        ),
    }
    yield from module_runs(request, tmp_path_factory, runs)


@pytest.fixture(scope="module")
def torch_run(training_runs) -> ScriptProcess:
    return training_runs["torch_run"]


@pytest.fixture(scope="module")
def jax_run(training_runs) -> ScriptProcess:
    return training_runs["jax_run"]


@pytest.fixture(scope="module")
def refused_run(training_runs) -> ScriptProcess:
    return training_runs["refused_run"]


def folder_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def expected_files(run: ScriptProcess, name: str) -> set[str]:
    events = {p.name for p in run.run_dir.glob("events.out.tfevents.*")}
    return events | {
        "README.md",
        "args.json",
        f"{name}.cleanrl_model",
        f"{name}.py",
        "learning_curve.png",
        "replay.mp4",
        "requirements.txt",
        "videos/eval-episode-0.mp4",
    }


def assert_arrived_complete(hub: LoopbackHub, run: ScriptProcess, name: str, env_id: str):
    """The run's repository on the Hub: every file, equal to the folder built again from the
    run folder, pushed in one commit; its card as `huggingface_hub` reads it."""
    from huggingface_hub import ModelCard, metadata_load

    repo_id = f"{hub.user}/{env_id}-{name}-seed1"
    assert repo_id in hub.repos, (sorted(hub.repos), describe(run.proc))
    arrived = hub.repos[repo_id]
    assert set(arrived) == expected_files(run, name)
    assert len(hub.commits[repo_id]) == 1
    assert arrived[f"{name}.cleanrl_model"] == (run.run_dir / f"{name}.cleanrl_model").read_bytes()
    assert arrived["replay.mp4"] == arrived["videos/eval-episode-0.mp4"]
    assert arrived[f"{name}.py"] == script(name).read_bytes()

    folder = run.cwd / "rebuilt"
    built = run_script(
        [run.run_dir, "--dry-run", "--output-dir", folder, "--hf-entity", hub.user],
        run.cwd,
        module="cleanrl_utils.huggingface",
        env=script_env(run.cwd, **hub_env(hub, run.cwd)),
    )
    assert built.returncode == 0, describe(built)
    assert folder_files(folder) == arrived

    # the card, as the Hub's own client reads it: metadata and the evaluation result
    evals = [value for _, value in read_scalars(run.run_dir)["eval/episodic_return"]]
    card = ModelCard.load(folder / "README.md")
    (result,) = card.data.eval_results
    assert result.metric_type == "mean_reward" and result.dataset_type == env_id
    assert result.metric_value == f"{np.mean(evals):.2f} +/- {np.std(evals):.2f}"
    metadata = metadata_load(folder / "README.md")
    assert metadata["library_name"] == "cleanrl" and env_id in metadata["tags"]
    assert "protocol-published" in metadata["tags"]  # (the runs here play the published one)
    text = card.text
    assert "under the published protocol (repeat_action_probability=0.0" in text
    assert f"python -m cleanrl_utils.enjoy --hf-repo {repo_id}" in text
    assert f"python cleanrl/{name}.py --env-id {env_id} --num-envs 2" in text
    assert "|num_envs|2|" in text and "![learning curve](learning_curve.png)" in text
    requirements = arrived["requirements.txt"].decode()
    assert "huggingface_hub==" in requirements and "torch==" in requirements
    return repo_id


def games(stdout: str) -> list[tuple[str, str]]:
    return GAME.findall(stdout)


@pytest.mark.slow
def test_a_torch_run_arrives_complete_and_enjoy_replays_it(hub, torch_run):
    torch_run.ok()
    assert f"pushed to {hub.url}/" in torch_run.proc.stdout
    repo_id = assert_arrived_complete(hub, torch_run, "ppo_atari_envpool", "Breakout-v5")
    trained = games(torch_run.proc.stdout)  # the training run's evaluation, seed 1 + 1
    assert len(trained) == 1

    # enjoy replays the model from the Hub; the run's last checkpoint holds the same weights, so
    # the evaluator plays the same game (the two processes side by side)
    cwd = torch_run.cwd
    args = ["--hf-repo", repo_id, "--seed", "2", "--eval-episodes", "1", "--capture-video"]
    enjoy = start_script(
        args, cwd, module="cleanrl_utils.enjoy", env=script_env(cwd, **hub_env(hub, cwd))
    )
    (checkpoint,) = torch_run.run_dir.glob("checkpoint_*.ckpt")
    args = ["--model-path", checkpoint, "--seed", "2", "--eval-episodes", "1"]
    evaluated = start_script(args, cwd, module="cleanrl_utils.evals")
    enjoy, evaluated = finish_script(enjoy), finish_script(evaluated)
    assert enjoy.returncode == 0, describe(enjoy)
    assert games(enjoy.stdout) == trained
    (videos,) = re.findall(r"^videos: (videos/enjoy/\S+)/$", enjoy.stdout, re.M)
    assert (cwd / videos / "eval-episode-0.mp4").stat().st_size > 0
    assert evaluated.returncode == 0, describe(evaluated)
    assert "(checkpoint of iteration 2)" in evaluated.stdout
    assert games(evaluated.stdout) == trained


@pytest.mark.slow
def test_a_jax_run_arrives_complete_and_enjoy_replays_it(hub, jax_run):
    jax_run.ok()
    name = "ppo_atari_envpool_xla_jax_scan"
    repo_id = assert_arrived_complete(hub, jax_run, name, "Breakout-v5")
    trained = games(jax_run.proc.stdout)
    assert len(trained) == 1

    # enjoy from the Hub and, one entry point for torch and JAX, the evaluator on the JAX
    # checkpoint play the same game (the two processes side by side)
    cwd = jax_run.cwd
    args = ["--hf-repo", repo_id, "--seed", "2", "--eval-episodes", "1"]
    enjoy = start_script(
        args, cwd, module="cleanrl_utils.enjoy", env=script_env(cwd, **hub_env(hub, cwd))
    )
    (checkpoint,) = jax_run.run_dir.glob("checkpoint_*.ckpt")
    args = ["--model-path", checkpoint, "--seed", "2", "--eval-episodes", "1"]
    evaluated = start_script(args, cwd, module="cleanrl_utils.evals")
    enjoy, evaluated = finish_script(enjoy), finish_script(evaluated)
    assert enjoy.returncode == 0, describe(enjoy)
    assert games(enjoy.stdout) == trained
    assert evaluated.returncode == 0, describe(evaluated)
    assert games(evaluated.stdout) == trained


@pytest.mark.slow
def test_a_refused_push_keeps_the_run_and_the_command_it_names_pushes_it(hub, refused_run):
    proc = refused_run.proc
    assert proc.returncode == 2, describe(proc)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, describe(proc)
    assert "HTTP 401" in errors[0] and "check the token" in errors[0], errors
    run_dir = refused_run.run_dir
    command = f"python -m cleanrl_utils.huggingface runs/{run_dir.name}"
    assert errors[0].endswith(f"the run is kept in runs/{run_dir.name}: push it with `{command}`")
    assert (run_dir / "ppo_atari.cleanrl_model").is_file()
    assert not [repo for repo in hub.repos if "ppo_atari-" in repo]

    # the command it names, with a token the Hub takes
    cwd = refused_run.cwd
    pushed = run_script(
        command.split()[3:],
        cwd,
        module="cleanrl_utils.huggingface",
        env=script_env(cwd, **hub_env(hub, cwd)),
    )
    assert pushed.returncode == 0, describe(pushed)
    repo_id = f"{hub.user}/BreakoutNoFrameskip-v4-ppo_atari-seed1"
    assert set(hub.repos[repo_id]) == expected_files(refused_run, "ppo_atari")
    assert "ale-py==" in hub.repos[repo_id]["requirements.txt"].decode()


def push_in_process(hub: LoopbackHub, monkeypatch, folder: Path, **kwargs):
    from huggingface_hub import constants

    from cleanrl_utils.huggingface.push import commit_folder, hub_call

    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setenv("HF_TOKEN", hub.token)
    repo_id = f"{hub.user}/Breakout-v5-retried-seed1"
    hub_call(lambda: commit_folder(folder, repo_id, "a test"), repo_id, retry_wait=0.01, **kwargs)
    return repo_id


def test_a_5xx_is_retried_and_then_the_folder_arrives(hub, monkeypatch, tmp_path, capsys):
    from cleanrl_utils.huggingface.push import PushError

    (tmp_path / "videos").mkdir()
    (tmp_path / "README.md").write_text("---\nlibrary_name: cleanrl\n---\n# a card\n")
    (tmp_path / "videos" / "game.mp4").write_bytes(bytes(range(256)) * 10)
    hub.fail_next("commit", 503, 502)
    repo_id = push_in_process(hub, monkeypatch, tmp_path, retries=2)
    assert hub.repos[repo_id] == folder_files(tmp_path)
    codes = [code for method, path, code in hub.calls if path.endswith("/commit/main")]
    assert codes[-3:] == [503, 502, 200]
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 2 and "HTTP 503" in warnings[0] and "trying again" in warnings[0]

    # more failures than retries: one message, exit code 1 (not a refused token)
    hub.fail_next("commit", 500, 500, 500)
    with pytest.raises(PushError) as error:
        push_in_process(hub, monkeypatch, tmp_path, retries=2)
    assert error.value.code == 1 and "failed after 3 tries (HTTP 500" in str(error.value)
    # a refusal is not retried
    hub.fail_next("commit", 403)
    with pytest.raises(PushError) as error:
        push_in_process(hub, monkeypatch, tmp_path, retries=2)
    assert error.value.code == 2 and "refused" in str(error.value)


def test_only_the_hubs_failure_is_said_with_what_became_of_the_run(tmp_path, monkeypatch, capsys):
    """`PushError` is the one `RunError` of `push_run` that its callers catch: the Hub's failure
    ends with what became of the run; a run folder it cannot push is said as it is."""
    import json

    from cleanrl_utils.console.errors import FAILED, fail
    from cleanrl_utils.huggingface import push

    run = tmp_path / "runs" / "Breakout-v5__ppo__1__1700000000"
    run.mkdir(parents=True)
    args = {"env_id": "Breakout-v5", "exp_name": "ppo", "seed": 1}
    (run / "config.json").write_text(json.dumps({"args": args}))
    argv = [str(run), "--dry-run", "--output-dir", str(tmp_path / "repo")]

    def hub_fails(*args, **kwargs):
        raise push.PushError("the push to the Hub failed (HTTP 500)", FAILED)

    def folder_refused(*args, **kwargs):
        fail(f"{run} has no evaluation")

    for push_run, code, line in [
        (hub_fails, 1, f"error: the push to the Hub failed (HTTP 500); nothing changed in {run}"),
        (folder_refused, 2, f"error: {run} has no evaluation"),
    ]:
        monkeypatch.setattr(push, "push_run", push_run)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            push.main(argv)
        assert (exit_info.value.code, capsys.readouterr().err) == (code, f"{line}\n")


def refused_by_run(capsys, tmp_path, script: str, **flags) -> str:
    """The one `error:` line with which `Run` (a script's first call after parsing its flags)
    rejects `flags`, with exit code 2, having made nothing on disk."""
    args = script_args(script, **flags)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info, entry_point():
        Run(args, str(REPO_ROOT / "cleanrl" / f"{script}.py"), str(tmp_path / "runs"), argv=[])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert not (tmp_path / "runs").exists()
    return lines[0]


@pytest.mark.parametrize("script_name", SCRIPT_CHECKS)
def test_upload_model_without_a_token_is_refused_before_training(
    script_name, monkeypatch, capsys, tmp_path
):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", "/nonexistent/token")
    line = refused_by_run(capsys, tmp_path, script_name, upload_model=True)
    assert line.startswith("error: --upload-model: no Hugging Face token"), line
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    line = refused_by_run(capsys, tmp_path, script_name, upload_model=True, hf_entity="two/parts")
    assert "--hf-entity 'two/parts'" in line


def test_upload_model_without_a_token_makes_nothing(tmp_path):
    env = script_env(tmp_path, HF_TOKEN="", HF_HOME=str(tmp_path / ".hf"))
    proc = run_script([*UPLOAD], tmp_path, env=env, timeout=120)
    assert_usage_error(proc, tmp_path, ["--upload-model", "token"])


# ---------------------------------------------------------------------------------------------
# The tools' faults (docs/faults.md, "the tools"): a config.json or an args.json of the wrong
# shape is one `error:` line naming the file and what is wrong


def one_error_line(capsys, main, argv: list[str]) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), out
    return lines[0]


@pytest.mark.parametrize(
    "config, message",
    [
        ({"args": {"exp_name": "ppo", "seed": 1}}, "its arguments have no `env_id`"),
        ({"args": {"env_id": "Breakout-v5", "seed": 1}}, "its arguments have no `exp_name`"),
        ({"args": {"env_id": "Breakout-v5", "exp_name": "ppo", "seed": "1"}}, "its `seed` is '1'"),
        ({"args": {"env_id": ["B"], "exp_name": "ppo", "seed": 1}}, "its `env_id` is ['B']"),
        (
            {"args": {"env_id": "Breakout-v5", "exp_name": "ppo", "seed": 1}, "command": 5},
            "its `command` is 5, not a list",
        ),
    ],
)
def test_a_push_of_a_config_json_of_the_wrong_shape_is_one_error_line(
    tmp_path, capsys, config, message
):
    import json

    from cleanrl_utils.huggingface.push import main

    run = tmp_path / "runs" / "Breakout-v5__ppo__1__1700000000"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    argv = [str(run), "--dry-run", "--output-dir", str(tmp_path / "repo")]
    line = one_error_line(capsys, main, argv)
    assert line.startswith(f"error: {run}/config.json: {message}"), line
    assert not (tmp_path / "repo").exists()


@pytest.mark.parametrize("args", [[1, 2], "Breakout-v5", None])
def test_enjoy_of_an_args_json_whose_args_is_not_an_object_is_one_error_line(
    tmp_path, capsys, args
):
    import json

    import torch

    import cleanrl.ppo_atari_envpool as torch_script
    from cleanrl_utils.enjoy import main
    from cleanrl_utils.files.model_file import save_torch_model

    name = "ppo_atari_envpool.cleanrl_model"
    save_torch_model(
        tmp_path / name, torch.nn.Linear(2, 1), torch_script.Args(), torch_script.__file__
    )
    info = {"script": "ppo_atari_envpool", "model": name, "args": args}
    (tmp_path / "args.json").write_text(json.dumps(info))
    line = one_error_line(capsys, main, ["--model-path", str(tmp_path)])
    assert line == (
        f"error: {tmp_path}: args.json is not one written by --upload-model "
        f'(its "args" is {args!r}, not an object)'
    )


def test_a_dry_run_into_the_run_folder_itself_is_one_error_line_and_changes_nothing(tmp_path):
    """`--dry-run --output-dir RUN`, RUN the run folder: the repository's files (a copy of the
    model among them) would be written over the run's (it was `SameFileError`)."""
    import dataclasses
    import json

    from torch.utils.tensorboard import SummaryWriter

    import cleanrl.ppo_atari_envpool as script
    from cleanrl_utils.files.model_file import save_torch_model

    run = tmp_path / "runs" / "Breakout-v5__ppo_atari_envpool__1__1700000000"
    run.mkdir(parents=True)
    args = dataclasses.asdict(script.Args(seed=1))
    envs = script.make_env("Breakout-v5", 1, 1)
    save_torch_model(
        run / "ppo_atari_envpool.cleanrl_model", script.Agent(envs), args, script.__file__
    )
    envs.close()
    writer = SummaryWriter(str(run))
    writer.add_scalar("eval/episodic_return", 2.0, 0)
    writer.close()
    command = ["cleanrl/ppo_atari_envpool.py"]
    (run / "config.json").write_text(
        json.dumps({"run_name": run.name, "args": args, "command": command})
    )
    before = folder_files(run)
    for output_dir in (f"{run}/", f"runs/../runs/{run.name}"):
        proc = run_script(
            [str(run), "--dry-run", "--output-dir", output_dir],
            tmp_path,
            module="cleanrl_utils.huggingface",
        )
        assert proc.returncode == 2 and proc.stderr.splitlines() == [
            f"error: --output-dir {output_dir} is the run folder itself: the repository's files "
            f"would be written over the run's; give another folder (hub/{run.name})"
        ], describe(proc)
    assert folder_files(run) == before
    proc = run_script(
        [str(run), "--dry-run", "--output-dir", f"hub/{run.name}"],
        tmp_path,
        module="cleanrl_utils.huggingface",
    )
    assert proc.returncode == 0 and (tmp_path / "hub" / run.name / "README.md").exists(), describe(
        proc
    )
