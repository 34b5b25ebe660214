"""What the evaluator takes as `--model-path` (`cleanrl_utils.files.model_file.read_model`): a model
file, a checkpoint, or a run folder (its model file, else its newest checkpoint); anything else
is one `error:` line that says what a model file is. Where its videos go: a new folder per
evaluation, named after the model's run (`evaluation_video_dir`)."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
import torch
from scripts_testing import describe, run_script

import cleanrl.ppo_atari_envpool as torch_script
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.evals.common import evaluation_video_dir
from cleanrl_utils.files.model_file import read_model, save_torch_model
from cleanrl_utils.files.state_file import write_checkpoint

RUN = "Breakout-v5__ppo_atari_envpool__3__1700000000"


def model_file(folder, name="ppo_atari_envpool.cleanrl_model"):
    folder.mkdir(parents=True, exist_ok=True)
    args = torch_script.Args(seed=3)
    save_torch_model(folder / name, torch.nn.Linear(2, 1), args, torch_script.__file__)
    return folder / name


def checkpoint(folder, iteration):
    payload = {
        "script": "ppo_atari_envpool",
        "run_name": folder.name,
        "iteration": iteration,
        "global_step": 1024 * iteration,
        "args": dataclasses.asdict(torch_script.Args(seed=3)),
        "rng": {},
        "state": {"agent": {"w": torch.full((2,), float(iteration))}},
    }
    write_checkpoint(folder / f"checkpoint_{iteration:07d}.ckpt", payload)


def error_line(capsys, call) -> str:
    with pytest.raises(SystemExit) as exit_info, entry_point():
        call()
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
    return line


def test_a_run_folder_stands_for_its_model_file_else_its_newest_checkpoint(tmp_path, capsys):
    run = tmp_path / "runs" / RUN
    run.mkdir(parents=True)
    checkpoint(run, 1)
    checkpoint(run, 2)
    model = read_model(run)
    assert model.path == run / "checkpoint_0000002.ckpt"
    assert model.source == "checkpoint of iteration 2"
    assert float(model.weights["w"][0]) == 2.0

    file = model_file(run)
    model = read_model(run)
    assert (model.path, model.source, model.script) == (file, "model", "ppo_atari_envpool")

    model_file(run, "other.cleanrl_model")
    line = error_line(capsys, lambda: read_model(run))
    assert "several model files (other.cleanrl_model, ppo_atari_envpool.cleanrl_model)" in line


def test_what_is_not_a_model_says_what_a_model_file_is(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("# a project\n\nNot a model.\n")
    line = error_line(capsys, lambda: read_model(readme))
    assert line.startswith(f"error: {readme} is not a model file: a model file is the ")
    assert ".cleanrl_model" in line and "--save-model" in line and "checkpoint_*.ckpt" in line
    assert "msgpack" not in line.lower() and "Error" not in line

    empty = tmp_path / "empty"
    empty.mkdir()
    line = error_line(capsys, lambda: read_model(empty))
    assert f"{empty} is a folder with no model file" in line and "no checkpoint" in line

    line = error_line(capsys, lambda: read_model(tmp_path / "missing.cleanrl_model"))
    assert "model file not found" in line and "--save-model" in line

    # a FIFO is never opened for reading (it would wait for a writer), alone or in a run folder
    fifo_run = tmp_path / "fifo"
    fifo_run.mkdir()
    os.mkfifo(fifo_run / "ppo_atari_envpool.cleanrl_model")
    for path in (fifo_run / "ppo_atari_envpool.cleanrl_model", fifo_run):
        line = error_line(capsys, lambda path=path: read_model(path))
        assert line.startswith("error: cannot read model file ") and "not a regular file" in line

    # a damaged model file is still called one, with what went wrong
    raw = model_file(tmp_path / "cut").read_bytes()
    (tmp_path / "cut" / "ppo_atari_envpool.cleanrl_model").write_bytes(raw[: len(raw) // 2])
    line = error_line(capsys, lambda: read_model(tmp_path / "cut"))
    assert line.startswith("error: cannot read model file ")


def test_each_evaluation_records_into_a_new_folder_named_after_the_models_run(tmp_path):
    model = read_model(model_file(tmp_path / "runs" / RUN))
    videos = tmp_path / "videos" / "eval"
    first = evaluation_video_dir(model, videos)
    assert first == videos / RUN
    first.mkdir(parents=True)  # (the first video makes it)
    second = evaluation_video_dir(model, videos)
    assert second == videos / f"{RUN}-2"
    second.mkdir()
    assert evaluation_video_dir(model, videos) == videos / f"{RUN}-3"

    # a model file outside a run folder (a copy, a download): named after its env id, script, seed
    elsewhere = read_model(model_file(tmp_path / "downloads"))
    assert evaluation_video_dir(elsewhere, videos) == videos / "Breakout-v5__ppo_atari_envpool__3"


# ---------------------------------------------------------------------------------------------
# The tools' faults (docs/faults.md, "the tools"): a model file whose metadata and weights
# disagree, a safetensors header whose length begins with the pickle's first byte


def test_a_model_file_naming_a_script_of_the_other_framework_is_one_error_line(tmp_path, capsys):
    import flax.serialization

    from cleanrl_utils.files.model_file import model_info, model_script

    path = tmp_path / "torch.cleanrl_model"  # torch weights, naming a JAX script
    jax_script = "ppo_atari_envpool_xla_jax"
    args = dataclasses.asdict(torch_script.Args(seed=3))
    save_torch_model(path, torch.nn.Linear(2, 1), args, f"cleanrl/{jax_script}.py")
    proc = run_script(
        ["--model-path", str(path), "--eval-episodes", "1"], tmp_path, module="cleanrl_utils.evals"
    )
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"error: {path} holds torch weights but names '{jax_script}', a JAX script: its network "
        "cannot take them"
    ], describe(proc)  # (it was an AttributeError: the JAX Agent has no `.to`)

    path = tmp_path / "jax.cleanrl_model"  # and the other way round
    data = {**model_info(torch_script.__file__, args), "params": {"w": [1.0]}}
    path.write_bytes(flax.serialization.msgpack_serialize(data))
    line = error_line(capsys, lambda: model_script(read_model(path)))
    assert line == (
        f"error: {path} holds JAX weights but names 'ppo_atari_envpool', a torch script: its "
        "network cannot take them"
    )


def test_a_safetensors_file_whose_header_length_begins_with_0x80_is_read(tmp_path):
    """A pickle begins with 0x80; so does a safetensors file whose header is 128 + 256k bytes
    long (one torch model in 256): it is read, not refused as a pickle."""
    path = tmp_path / "ppo_atari_envpool.cleanrl_model"
    for n in range(256):
        args = dataclasses.asdict(torch_script.Args(seed=3, wandb_project_name="x" * (n + 1)))
        save_torch_model(path, torch.nn.Linear(2, 1), args, torch_script.__file__)
        if path.read_bytes()[:1] == b"\x80":
            break
    else:
        pytest.fail("no header length of 128 + 256k bytes among those tried")
    model = read_model(path)
    assert (model.framework, model.script) == ("torch", "ppo_atari_envpool")


# ---------------------------------------------------------------------------------------------
# The fourth probe (issue 54): a model file's recorded protocol goes through the command line's
# checks, and its action set must be the network's (it was checked for types only, and played)

BAD_PROTOCOLS = [
    (dict(max_episode_steps=0), ["--max-episode-steps", "0"]),
    (dict(max_episode_steps=-5), ["--max-episode-steps", "-5"]),
    (dict(max_episode_steps=True), ["--max-episode-steps", "True"]),
    (dict(repeat_action_probability=5.0), ["--repeat-action-probability", "5.0"]),
    (dict(repeat_action_probability=float("nan")), ["--repeat-action-probability", "nan"]),
    (dict(noop_max=-3), ["--noop-max", "-3"]),
    (dict(noop_max=10**12), ["--noop-max", "1000000000000"]),
    (dict(name="mine"), ["name", "'mine'"]),
    # an 18-output network (trained on the full action set) said to play a game's minimal one
    (dict(full_action_space=False), ["minimal action set", "full action set"]),
]


def model_with_protocol(path, framework: str, edit: dict, weights: dict | None = None):
    """A model file of the envpool script (torch) or its JAX sibling, trained on the full action
    set (18 actions), whose recorded protocol is then edited by `edit`."""
    import flax.serialization
    from safetensors.torch import save

    from cleanrl_utils.files.model_file import METADATA_KEY, model_info

    script = "ppo_atari_envpool" if framework == "torch" else "ppo_atari_envpool_xla_jax"
    args = dataclasses.asdict(torch_script.Args(seed=3, full_action_space=True))
    info = model_info(f"cleanrl/{script}.py", args)
    info["protocol"] |= edit
    if framework == "torch":
        weights = weights or {"w": torch.zeros(1)}
        path.write_bytes(save(weights, metadata={METADATA_KEY: json.dumps(info)}))
    else:
        path.write_bytes(flax.serialization.msgpack_serialize({**info, "params": {"w": [1.0]}}))
    return path


@pytest.mark.parametrize("framework", ["torch", "jax"])
@pytest.mark.parametrize(("edit", "words"), BAD_PROTOCOLS, ids=[str(e) for e, _ in BAD_PROTOCOLS])
def test_a_recorded_protocol_the_command_line_would_refuse_is_one_error_line(
    tmp_path, capsys, framework, edit, words
):
    path = model_with_protocol(tmp_path / "m.cleanrl_model", framework, edit)
    line = error_line(capsys, lambda: read_model(path))
    assert line.startswith(f"error: {path}: the protocol recorded in the file cannot be used: ")
    assert all(word in line for word in words), line


def test_a_recorded_protocol_that_passes_the_checks_is_read(tmp_path):
    for framework in ("torch", "jax"):
        path = model_with_protocol(tmp_path / f"{framework}.cleanrl_model", framework, {})
        assert read_model(path).protocol["full_action_space"] is True


def test_the_evaluator_refuses_a_network_said_to_play_another_action_set(tmp_path):
    """In a real process: it played the 18-output network on Breakout's 4 actions, exit 0."""
    envs = torch_script.make_env("Breakout-v5", 1, 1, full_action_space=True)
    weights = torch_script.Agent(envs).state_dict()
    envs.close()
    path = tmp_path / "m.cleanrl_model"
    model_with_protocol(path, "torch", dict(full_action_space=False), weights)
    proc = run_script(
        ["--model-path", str(path), "--eval-episodes", "1"], tmp_path, module="cleanrl_utils.evals"
    )
    assert proc.returncode == 2, describe(proc)
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"error: {path}: the protocol recorded") and "action set" in line
