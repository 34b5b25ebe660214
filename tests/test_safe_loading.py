"""Every path that reads a model or a checkpoint reads a format that cannot carry code, and refuses
a pickle unread: the checkpoint encoding round-trips what a checkpoint holds exactly (tensors as
tensors, tuples as tuples); a pickle whose payload would create a marker file is refused by the
evaluator, `enjoy` (also when served by the Hub) and `--resume`, and the marker never appears;
`python -m cleanrl_utils.convert` converts old files that the user trusts; the command-line tools
name themselves as users type them."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import random
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from scripts_testing import REPO_ROOT, assert_usage_error, run_script, script_env

import cleanrl.ppo_atari_envpool as torch_script
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.files.model_file import read_model
from cleanrl_utils.files.state_file import (
    PICKLE_MAGIC,
    PickleCheckpoint,
    decode_tree,
    encode_tree,
    read_checkpoint,
    write_checkpoint,
)
from cleanrl_utils.run import Run

SCRIPT = str(REPO_ROOT / "cleanrl" / "ppo_atari_envpool.py")


class Payload:
    """Unpickling this creates the marker file: what a malicious model would do."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def malicious_files(folder: Path) -> tuple[Path, dict[str, bytes]]:
    """A pickle, a torch.save file and an old-format checkpoint, each carrying the payload."""
    marker = folder / "payload-ran"
    data = pickle.dumps({"script": "ppo_atari_envpool", "args": {}, "x": Payload(marker)})
    buffer = io.BytesIO()
    torch.save({"model_state_dict": Payload(marker)}, buffer)
    checkpoint = pickle.dumps({"iteration": 1, "state": Payload(marker)})
    old = PICKLE_MAGIC + hashlib.sha256(checkpoint).digest() + checkpoint
    return marker, {
        "pickle.cleanrl_model": data,
        "torch_save.cleanrl_model": buffer.getvalue(),
        "checkpoint_0000001.ckpt": old,
    }


def test_the_payload_would_run_if_unpickled(tmp_path):
    """(The test's own premise: the files do carry a payload that runs.)"""
    marker, files = malicious_files(tmp_path)
    pickle.loads(files["pickle.cleanrl_model"])
    assert marker.exists()


@pytest.mark.parametrize(
    "name", ["pickle.cleanrl_model", "torch_save.cleanrl_model", "checkpoint_0000001.ckpt"]
)
def test_the_evaluator_refuses_a_pickle_unread(tmp_path, capsys, name):
    marker, files = malicious_files(tmp_path)
    path = tmp_path / name
    path.write_bytes(files[name])
    with pytest.raises(SystemExit) as exit_info, entry_point():
        read_model(path)
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {path} is a") and "refused unread" in line, line
    assert f"python -m cleanrl_utils.convert {path}" in line
    assert not marker.exists()


def test_resume_refuses_an_old_pickle_checkpoint_unread(tmp_path, capsys):
    marker, files = malicious_files(tmp_path)
    path = tmp_path / "runs" / "Breakout-v5__ppo_atari_envpool__1__1" / "checkpoint_0000001.ckpt"
    path.parent.mkdir(parents=True)
    path.write_bytes(files["checkpoint_0000001.ckpt"])
    with pytest.raises(PickleCheckpoint):
        read_checkpoint(path)
    for target in (path, path.parent):  # the file, or its run folder
        with pytest.raises(SystemExit) as exit_info, entry_point():
            Run(torch_script.Args(resume=str(target)), SCRIPT, runs_dir=str(tmp_path / "runs"))
        assert exit_info.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"error: --resume: {path} is a checkpoint of the older format")
        assert "python -m cleanrl_utils.convert" in line
    assert not marker.exists()


def test_the_evaluator_command_refuses_a_pickle_unread(tmp_path):
    marker, files = malicious_files(tmp_path)
    (tmp_path / "agent.cleanrl_model").write_bytes(files["torch_save.cleanrl_model"])
    args = ["--model-path", "agent.cleanrl_model", "--eval-episodes", "1"]
    proc = run_script(args, tmp_path, module="cleanrl_utils.evals", timeout=120)
    assert_usage_error(proc, tmp_path, ["agent.cleanrl_model", "refused unread"])
    assert not marker.exists()


def test_enjoy_refuses_a_pickle_served_by_the_hub(tmp_path):
    pytest.importorskip("huggingface_hub")
    from hub_server import LoopbackHub

    marker, files = malicious_files(tmp_path)
    info = {"script": "ppo_atari_envpool", "model": "agent.cleanrl_model", "args": {}}
    repo_id = "someone/Breakout-v5-ppo_atari_envpool-seed1"
    with LoopbackHub() as hub:
        hub.add_repo(
            repo_id,
            {
                "args.json": json.dumps(info).encode(),
                "agent.cleanrl_model": files["pickle.cleanrl_model"],
            },
        )
        env = script_env(tmp_path, **hub.env(), HF_HOME=str(tmp_path / ".hf"))
        proc = run_script(["--hf-repo", repo_id], tmp_path, module="cleanrl_utils.enjoy", env=env)
    assert_usage_error(proc, tmp_path, ["agent.cleanrl_model", "is a pickle", "refused unread"])
    assert not marker.exists()


def test_checkpoint_encoding_gives_back_what_a_checkpoint_holds(tmp_path):
    agent = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    agent(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    payload = {
        "iteration": 3,
        "rng": {
            "python": random.getstate(),
            "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
        },
        "state": {
            "agent": agent.state_dict(),
            "optimizer": optimizer.state_dict(),
            "avg_returns": [1.0, 2.5, float("nan")],
            "flax": {
                "params": {"w": np.arange(6, dtype=np.float32).reshape(2, 3)},
                "step": np.int32(4),
            },
            "key": np.array([0, 42], dtype=np.uint32),
            "empty": np.zeros((0, 3)),
            "deque": deque([1, 2]),
            "none": None,
        },
    }
    path = tmp_path / "checkpoint_0000003.ckpt"
    write_checkpoint(path, payload)
    back = read_checkpoint(path)
    assert back["rng"]["python"] == payload["rng"]["python"]  # a tuple of a tuple
    numpy_state = back["rng"]["numpy"]
    assert isinstance(numpy_state, tuple) and numpy_state[1].dtype == np.uint32
    np.testing.assert_array_equal(numpy_state[1], payload["rng"]["numpy"][1])
    assert numpy_state[2:] == payload["rng"]["numpy"][2:]
    assert torch.equal(back["rng"]["torch"], torch.get_rng_state())
    for name, tensor in agent.state_dict().items():
        assert torch.equal(back["state"]["agent"][name], tensor)
    saved, restored = optimizer.state_dict(), back["state"]["optimizer"]
    assert restored["param_groups"] == saved["param_groups"]  # (betas: a tuple)
    assert list(restored["state"]) == [0, 1]  # integer keys
    assert torch.equal(restored["state"][0]["exp_avg"], saved["state"][0]["exp_avg"])
    torch.optim.Adam(agent.parameters()).load_state_dict(restored)
    state = back["state"]
    assert state["avg_returns"][:2] == [1.0, 2.5] and np.isnan(state["avg_returns"][2])
    assert state["flax"]["step"] == 4 and isinstance(state["flax"]["step"], np.int32)
    assert state["flax"]["params"]["w"].dtype == np.float32
    assert state["key"].tolist() == [0, 42] and state["empty"].shape == (0, 3)
    assert state["deque"] == [1, 2] and state["none"] is None


def test_checkpoint_encoding_holds_numbers_only():
    with pytest.raises(TypeError, match="dtype object"):
        encode_tree({"x": np.array([object()])})
    with pytest.raises(TypeError, match="Payload"):
        encode_tree({"x": Payload(Path("nowhere"))})
    body = encode_tree({"x": np.zeros(2)})
    forged = body.replace(b'"dtype": "<f8"', b'"dtype": "|O8"')
    with pytest.raises(ValueError, match="only numbers"):
        decode_tree(forged)


def test_convert_turns_trusted_old_files_into_the_new_formats(tmp_path, capsys):
    from cleanrl_utils.convert import main

    payload = {"iteration": 2, "state": {"w": torch.arange(3.0)}, "rng": (1, 2)}
    data = pickle.dumps(payload)
    checkpoint = tmp_path / "checkpoint_0000002.ckpt"
    checkpoint.write_bytes(PICKLE_MAGIC + hashlib.sha256(data).digest() + data)
    agent = torch_script.Agent(SimpleNamespace(single_action_space=gym.spaces.Discrete(4)))
    model = tmp_path / "ppo_atari_envpool.cleanrl_model"
    args = {"env_id": "Breakout-v5", "seed": 1}
    torch.save(
        {
            "script": "cleanrl.ppo_atari_envpool",
            "args": args,
            "model_state_dict": agent.state_dict(),
        },
        model,
    )
    main([str(checkpoint), str(model)])
    assert capsys.readouterr().out.count("converted") == 2
    back = read_checkpoint(checkpoint)
    assert torch.equal(back["state"]["w"], torch.arange(3.0)) and back["rng"] == (1, 2)
    loaded = read_model(model)
    assert (loaded.script, loaded.args, loaded.framework) == ("ppo_atari_envpool", args, "torch")
    for name, tensor in agent.state_dict().items():
        assert torch.equal(loaded.weights[name], tensor)


@pytest.mark.parametrize(
    "module",
    [
        "cleanrl_utils.evals",
        "cleanrl_utils.evals.jax_eval",
        "cleanrl_utils.enjoy",
        "cleanrl_utils.huggingface.push",
        "cleanrl_utils.convert",
    ],
)
def test_help_names_the_command_as_users_type_it(module, capsys):
    import importlib

    main = importlib.import_module(module).main
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    usage = " ".join(capsys.readouterr().out.split())
    command = module.removesuffix(".push")
    assert f"usage: python -m {command} " in usage, usage[:300]
