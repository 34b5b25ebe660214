"""Model files: what `--save-model` writes and what the evaluator, `enjoy` and the Hub upload read,
in formats that cannot carry code. Both kinds are named `{exp_name}.cleanrl_model` and told apart
by their first bytes:

- torch scripts: a safetensors file: the agent's `state_dict()` as tensors, and in the file's
  metadata, under the key `cleanrl`, a JSON object `{"format": "cleanrl-model", "version": 1,
  "script": "ppo_atari_envpool", "args": {...}}` (the script's name and its arguments);
- JAX scripts: a flax msgpack file of `{"format": "cleanrl-model", "version": 1, "script": ...,
  "args": {...}, "params": {...}}` (the parameters in flax's state-dict form), read with
  `flax.serialization.msgpack_restore`, which builds only dicts, lists, numbers, strings and NumPy
  arrays of numbers.

A checkpoint (`checkpoint_*.ckpt`, `cleanrl_utils.files.state_file`) holds the agent's weights of its
iteration too, so every tool that takes a model file also takes one. A pickle (`torch.save`
files, the torch models of older versions) is refused unread: `python -m cleanrl_utils.convert`
converts one you trust.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.checks.args import number_problem, value_problem
from cleanrl_utils.console.errors import RunError, fail
from cleanrl_utils.envs import protocols
from cleanrl_utils.files.atomic import atomic_write_bytes
from cleanrl_utils.files.run_names import name_problem
from cleanrl_utils.files.scripts import load_script
from cleanrl_utils.files.state_file import (
    MAGIC,
    PICKLE_MAGIC,
    CorruptCheckpoint,
    list_checkpoints,
    read_checkpoint,
    read_regular_file,
)

FORMAT = "cleanrl-model"
METADATA_KEY = "cleanrl"  # the safetensors metadata entry that holds the script and arguments
ZIP_MAGIC = b"PK\x03\x04"  # torch.save's zip archive, a pickle inside
NAMES = {"torch": "torch", "jax": "JAX"}  # the frameworks, as messages name them
PICKLE_OPCODE = b"\x80"  # the first byte of a pickle (protocol 2 and later)


class UnsafeFile(Exception):
    """A file that could only be read by unpickling it."""


@dataclass
class Model:
    """A model as read from a model file or a checkpoint."""

    path: Path
    script: str  # the name of the script in cleanrl/ that trained it: `ppo_atari_envpool`
    args: dict  # its arguments
    weights: dict  # torch: the agent's state_dict; JAX: the parameters in flax's state-dict form
    framework: str  # "torch" or "jax"
    source: str  # "model", or "checkpoint of iteration N"
    protocol: dict | None = None  # as the model file records it (`protocols.record`)


def model_info(script_file: str, args) -> dict:
    """What a model file says of itself: the script (a path or name), its arguments (a
    dataclass or a dict) and the protocol of the games it was trained on (`protocols.record`)."""
    script = Path(script_file).stem
    return {
        "format": FORMAT,
        "version": 1,
        "script": script,
        "args": args if isinstance(args, dict) else dataclasses.asdict(args),
        "protocol": protocols.record(args, script if isinstance(args, dict) else None),
    }


def save_torch_model(path: str | Path, agent, args, script_file: str) -> None:
    """The torch scripts' model file (safetensors), written atomically."""
    from safetensors.torch import save

    metadata = {METADATA_KEY: json.dumps(model_info(script_file, args))}
    weights = {name: t.detach().contiguous() for name, t in agent.state_dict().items()}
    atomic_write_bytes(path, save(weights, metadata=metadata))
    print(f"model saved to {path}")


def save_jax_model(path: str | Path, params, args, script_file: str) -> None:
    """The JAX scripts' model file (flax msgpack), written atomically."""
    import flax.serialization
    import jax

    data = model_info(script_file, args)
    data["params"] = flax.serialization.to_state_dict(jax.device_get(params))
    atomic_write_bytes(path, flax.serialization.msgpack_serialize(data))
    print(f"model saved to {path}")


def is_safetensors(raw: bytes) -> bool:
    """A safetensors file: a little-endian u64 header length, then a JSON header."""
    return len(raw) > 8 and raw[8:9] == b"{" and struct.unpack("<Q", raw[:8])[0] <= len(raw) - 8


def unsafe_kind(raw: bytes) -> str | None:
    """What a file that only unpickling could read is, or None."""
    if raw.startswith(PICKLE_MAGIC):
        return "a checkpoint of the older format (a pickle)"
    if raw.startswith(ZIP_MAGIC):
        return "a torch.save file (a pickle in a zip archive)"
    # (a safetensors header of 128 + 256k bytes: its length begins with the same byte, and its
    # JSON follows at byte 8, in a whole file or one cut short)
    if raw.startswith(PICKLE_OPCODE) and raw[8:9] != b"{":
        return "a pickle"
    return None


def parse_model_bytes(path: Path, raw: bytes) -> Model:
    """A model file's content; `UnsafeFile` for a pickle (never unpickled), `ValueError` or
    another exception for anything else that is not a model file."""
    kind = unsafe_kind(raw)
    if kind is not None:
        raise UnsafeFile(kind)
    if is_safetensors(raw):
        from safetensors.torch import load

        (length,) = struct.unpack("<Q", raw[:8])
        metadata = json.loads(raw[8 : 8 + length]).get("__metadata__") or {}
        info = json.loads(metadata[METADATA_KEY])
        weights, framework = load(raw), "torch"
    else:
        import flax.serialization

        info = flax.serialization.msgpack_restore(raw)
        if not isinstance(info, dict):
            raise ValueError("not a model file")
        weights, framework = info["params"], "jax"
    script = str(info["script"]).removeprefix("cleanrl.")  # (JAX files before 2: `cleanrl.x`)
    args, protocol = info["args"], info.get("protocol")
    if not isinstance(args, dict) or "env_id" not in args:
        raise ValueError("no arguments with an env_id")
    if protocol is not None and not (isinstance(protocol, dict) and protocol_fits(protocol)):
        raise ValueError(f"a protocol of another shape: {protocol!r}"[:200])
    return Model(Path(path), script, args, weights, framework, "model", protocol)


def protocol_fits(protocol: dict) -> bool:
    """A recorded protocol with a name and the five settings, each of its type."""
    kinds = dict(name=str, repeat_action_probability=(int, float), full_action_space=bool)
    kinds |= dict(episodic_life=bool, noop_max=int, max_episode_steps=int)
    return all(isinstance(protocol.get(key), kind) for key, kind in kinds.items())


def args_problem(args: dict, fields: dict | None = None) -> str | None:
    """Why a model's recorded arguments cannot be used, or None: they go through the command
    line's checks (the names that become paths, the numbers, the protocol's settings, and with
    the script's `fields` their types), since a file can hold anything."""
    if not isinstance(args.get("seed"), int) or isinstance(args.get("seed"), bool):
        return f"--seed must be an integer, got {args.get('seed')!r}"[:200]
    for name, value in args.items():
        problem = fields is not None and name in fields and value_problem(name, value, fields[name])
        if problem:
            return problem
    return (
        name_problem(args.get("exp_name", "model"), args["env_id"])
        or number_problem(args)
        or protocols.protocol_problem({"protocol": None} | args, given=set())
    )


# the types of a recorded protocol's settings, as a script's `Args` has them
SETTING_TYPES = dict(
    repeat_action_probability=float,
    full_action_space=bool,
    episodic_life=bool,
    noop_max=int,
    max_episode_steps=int,
)


def recorded_protocol_problem(model: Model) -> str | None:
    """Why the protocol a model file records cannot be played, or None: its settings go through
    the command line's checks (what `--max-episode-steps 0` or `--noop-max -3` would be told),
    and its action set must be the one the network was built for (its arguments'), else the
    network would choose among actions the games do not have."""
    protocol = model.protocol
    if protocol is None:  # (a checkpoint, an older file: its arguments' settings are played)
        return None
    names = (*protocols.NAMES, "custom")
    if protocol.get("name") not in names:
        return f"its name must be one of {', '.join(names)}, got {protocol.get('name')!r}"[:200]
    settings = {name: protocol.get(name) for name in protocols.SETTINGS}
    for name, value in settings.items():
        if problem := value_problem(name, value, SETTING_TYPES[name]):
            return problem
    problem = number_problem(settings)
    problem = problem or protocols.protocol_problem({"protocol": None} | settings, given=set())
    if problem:
        return problem
    built = protocols.settings(model.args, model.script)["full_action_space"]
    if settings["full_action_space"] != built:
        said = {True: "the full action set", False: "the game's minimal action set"}
        return (
            f"it plays {said[settings['full_action_space']]} (full_action_space "
            f"{settings['full_action_space']}) and its network was built for {said[built]} (its "
            f"arguments' full_action_space {built}): the network cannot choose among those actions"
        )
    return None


def model_from_checkpoint(path: Path) -> Model:
    payload = read_checkpoint(path)
    state = payload["state"]
    if "agent" in state:  # torch: the agent's state_dict
        weights, framework = state["agent"], "torch"
    else:  # JAX: the flax TrainState in state-dict form
        weights, framework = state["agent_state"]["params"], "jax"
    source = f"checkpoint of iteration {payload['iteration']}"
    return Model(Path(path), payload["script"], payload["args"], weights, framework, source)


WHAT_A_MODEL_IS = (
    "a model file is the `{exp_name}.cleanrl_model` that a script's --save-model writes in its "
    "run folder, or a checkpoint (`checkpoint_*.ckpt`); a run folder stands for its model file"
)


def model_in_run_folder(folder: Path) -> Path:
    """The model of a run folder: its model file, else its newest checkpoint; exits 2 with one
    `error:` line when it has neither, or several model files."""
    models = sorted(folder.glob("*.cleanrl_model"))
    if len(models) > 1:
        names = ", ".join(p.name for p in models)
        fail(f"{folder} holds several model files ({names}): give one with --model-path")
    if models:
        return models[0]
    checkpoints = list_checkpoints(folder)
    if checkpoints:
        return checkpoints[0]
    fail(
        f"{folder} is a folder with no model file (`*.cleanrl_model`, written by --save-model) and "
        "no checkpoint (`checkpoint_*.ckpt`)"
    )


def looks_like_a_model(raw: bytes) -> bool:
    """Begins as a model file does, whole or cut short: a safetensors header (a length, then
    JSON), or a msgpack map (flax's files)."""
    return raw[8:9] == b"{" or raw[:1] in (b"\xde", b"\xdf") or 0x80 <= raw[0] <= 0x8F


def _read_model(path: Path) -> Model:
    path = Path(path)
    if path.is_dir():
        path = model_in_run_folder(path)
    if not path.exists():
        fail(f"model file not found: {path} ({WHAT_A_MODEL_IS})")
    try:  # (a FIFO is never opened for reading: it would wait for a writer)
        raw = read_regular_file(path)
    except CorruptCheckpoint as exc:
        fail(f"cannot read model file {path}: {exc}")
    try:
        if raw.startswith(MAGIC):
            return model_from_checkpoint(path)
        if unsafe_kind(raw) is None and not (raw and looks_like_a_model(raw)):
            fail(f"{path} is not a model file: {WHAT_A_MODEL_IS}")
        return parse_model_bytes(path, raw)
    except UnsafeFile as exc:
        fail(
            f"{path} is {exc}: refused unread, since unpickling a file can run any code in it; if you trust it (your own "
            f"run wrote it), convert it with `python -m cleanrl_utils.convert {path}`"
        )
    except CorruptCheckpoint as exc:
        fail(f"cannot read checkpoint {path}: {exc}")
    except (ModuleNotFoundError, RunError):  # (a JAX model without the jax extra: extras says so)
        raise
    except Exception as exc:  # a truncated or foreign file: say which, without a traceback
        fail(f"cannot read model file {path}: {type(exc).__name__}: {str(exc)[:200]}")


def read_model(path: str | Path) -> Model:
    """The model in a model file or a checkpoint, or in a run folder (`model_in_run_folder`);
    exits 2 with one `error:` line on anything else (a pickle is refused without being
    unpickled), and on recorded arguments or a recorded protocol that the command line would
    refuse (`args_problem`, `recorded_protocol_problem`)."""
    model = _read_model(Path(path))
    if not isinstance(model.script, str) or not isinstance(model.args, dict):
        fail(f"cannot read model file {path}: no script name and arguments")
    if not isinstance(model.args.get("env_id"), str):
        fail(f"cannot read model file {path}: no env id in its arguments")
    problem = args_problem(model.args)
    if problem:
        fail(f"{path}: the arguments recorded in the file cannot be used: {problem}")
    problem = recorded_protocol_problem(model)
    if problem:
        fail(f"{path}: the protocol recorded in the file cannot be used: {problem}")
    return model


def model_script(model: Model):
    """The module of the script that trained `model`, once its env id is checked as that script
    checks it (the `check_*_id` function it imports: `check_envpool_atari_id`, ...);
    exits 2 with one `error:` line when the script is not one of cleanrl/ or the env id is not
    one of its games."""
    try:
        script = load_script(model.script)
    except Exception as exc:
        fail(
            f"{model.path} was trained by {model.script!r}, which cannot be loaded as a script of "
            f"cleanrl/ ({type(exc).__name__}: {exc})"
        )
    missing = [
        name for name in ("make_env", "Agent", "EpisodeStatistics") if not hasattr(script, name)
    ]
    if missing:
        fail(f"{model.path}: cleanrl/{model.script}.py has no {', '.join(missing)}")
    framework = "jax" if hasattr(script, "jax") else "torch"  # (the JAX scripts import jax)
    if framework != model.framework:  # (a file edited, or written by another tool)
        fail(
            f"{model.path} holds {NAMES[model.framework]} weights but names {model.script!r}, "
            f"a {NAMES[framework]} script: its network cannot take them"
        )
    fields = {f.name: f.type for f in dataclasses.fields(script.Args)}
    problem = args_problem(model.args, fields)
    if problem:
        fail(f"{model.path}: the arguments recorded in the file cannot be used: {problem}")
    for name in dir(script):
        if name.startswith("check_") and name.endswith("_id") and callable(getattr(script, name)):
            getattr(script, name)(model.args["env_id"])
    return script
