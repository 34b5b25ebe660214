"""Bad input is caught before any environment is built: one clear line and exit code 2."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import io
import math
import re
import sys
import types
import typing

from cleanrl_utils.console import output
from cleanrl_utils.console.errors import fail

SEED_LIMIT = 2**31  # seeds: 0 <= seed + env index < 2**31 (EnvPool's int32, NumPy's uint32 too)
INT_LIMIT = 2**63  # a count past int64 overflows in NumPy and torch
C_INT = 2**31 - 1  # a C `int`: what EnvPool and ALE take through pybind11 (more: a TypeError)
# the no-op starts' bound, far below a C int: the gymnasium scripts play them one frame at a time
# in Python inside a reset (~150 us a frame), where a stop signal waits for them to end; 10,000
# frames take seconds (the published runs: 30; a whole game: 108,000 frames)
NOOP_MAX_LIMIT = 10_000
# the largest value of each integer flag that reaches C code: what the C type that receives it
# holds, or less
C_INT_FLAGS = {
    # ALE counts frames, 4 to a step (EnvPool counts steps: one limit, so that a command line
    # carries over between the EnvPool and ALE scripts)
    "max_episode_steps": (C_INT // 4, "ALE counts its 4 frames a step in a C int"),
    "num_envs": (C_INT, "a C int in EnvPool and ALE"),
    "local_num_envs": (C_INT, "a C int in EnvPool and ALE"),
    # (one limit for every script, so that a command line carries over)
    "noop_max": (
        NOOP_MAX_LIMIT,
        "the no-op starts are played before the agent acts, and a stop waits for them",
    ),
}
# what one transition of a rollout holds: 4 stacked 84x84 uint8 frames and ~10 float32 values
TRANSITION_BYTES = 4 * 84 * 84 + 10 * 4
# what one env holds besides: its frame stack and two raw 210x160 RGB frames (max-pooled)
ENV_BYTES = 4 * 84 * 84 + 2 * 210 * 160 * 3


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _one_line(box: str) -> str:
    """The message of tyro's error box, on one line: its first block of text without the frame
    and the title (a terminal gets a frame, a pipe a title line and rules)."""
    blocks: list[list[str]] = [[]]
    for line in box.splitlines():
        line = line.strip()
        if line.startswith(("╭", "╰", "+")):  # the frame's top (with the title) and bottom
            continue
        line = line.strip("│|").strip()
        if not line or set(line) <= set("─-= "):  # a rule between blocks
            blocks.append([])
        else:
            blocks[-1].append(line)
    blocks = [b for b in blocks if b]
    if len(blocks) > 1 and len(blocks[0]) == 1 and not set(blocks[0][0]) & set(":."):
        blocks = blocks[1:]  # the title, as a line of its own
    return " ".join(blocks[0]) if blocks else box.strip().replace("\n", " ")


def tyro_error_line(box: str, argv: list[str], cls) -> str:
    """What tyro printed (`box`) when it could not parse `argv` into the dataclass `cls`, as one
    line in our words (without `error:`)."""
    return _tyro_message(_one_line(box), argv, cls)


def _tyro_message(message: str, argv: list[str], cls) -> str:
    """tyro's error, said in our words: the bad value and the flag, the `--no-` form of a switch."""
    message = re.sub(r"^Error parsing (\S+): ", r"\1: ", message)
    message = re.sub(
        r"invalid literal for int\(\) with base 10: '(.*)'$",
        r"'\1' is not a whole number (write it out in digits: 10000000, not 1e7)",
        message,
    )
    message = re.sub(
        r"could not convert string to float: '(.*)'$", r"'\1' is not a number", message
    )
    switches = {flag(f.name) for f in dataclasses.fields(cls) if f.type in (bool, "bool")}
    for before, word in zip(argv, argv[1:]):
        if before in switches and word.lower() in {"true", "false", "yes", "no", "0", "1"}:
            negative = "--no-" + before[2:]
            return (
                f"{before} takes no value (got {word!r}): give {before} to switch it on, "
                f"{negative} to switch it off"
            )
    if message.startswith("Unrecognized options: "):
        names = [f for f in re.findall(r"--[\w-]+", message)]
        known = [flag(f.name) for f in dataclasses.fields(cls) if f.init]
        known += ["--no-" + k[2:] for k in switches]
        hints = [m for n in names for m in difflib.get_close_matches(n, known, n=1, cutoff=0.75)]
        if hints:
            message += f"; did you mean {', '.join(dict.fromkeys(hints))}?"
    return message


def parse_args(
    cls, argv: list[str] | None = None, prog: str | None = None, description: str | None = None
):
    """The command line parsed into the dataclass `cls` (with tyro): `--help` as tyro shows it;
    a malformed command line is one `error:` line and exit code 2 (not tyro's box), and so are
    numbers no script can use (`check_numbers`). Nothing is written."""
    import tyro

    argv = list(sys.argv[1:] if argv is None else argv)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            args = tyro.cli(cls, args=argv, prog=prog, description=description)
    except SystemExit as exc:
        if exc.code in (0, None):
            output.stream("stderr").write(captured.getvalue())  # (a None stderr: `2>&-`)
            raise
        fail(tyro_error_line(captured.getvalue(), argv, cls))
    output.stream("stderr").write(captured.getvalue())  # (tyro's warnings, if any)
    problem = number_problem(args)
    if problem:
        fail(problem)
    return args


def _field_kinds(annotation) -> tuple[type, ...]:
    """The types a field of `annotation` may hold (`float | None`: float and NoneType)."""
    if isinstance(annotation, str):  # (a module with `from __future__ import annotations`)
        named = {"int": int, "float": float, "bool": bool, "str": str, "None": type(None)}
        parts = [named.get(part.strip(), object) for part in annotation.split("|")]
        return tuple(parts)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return tuple(k for a in typing.get_args(annotation) for k in _field_kinds(a))
    return (annotation,) if isinstance(annotation, type) else (object,)


def value_problem(name: str, value, annotation) -> str | None:
    """Why `value` cannot be the field `name` of type `annotation` (int, float, bool, str,
    `X | None`), or None: what the command line's parser allows, for values read from files."""
    kinds = _field_kinds(annotation)
    if value is None and type(None) in kinds or object in kinds:
        return None
    if isinstance(value, bool):
        ok = bool in kinds
    elif isinstance(value, int):
        ok = int in kinds or float in kinds
    elif isinstance(value, float):
        ok = float in kinds
    else:
        ok = any(isinstance(value, k) for k in kinds if k not in (bool, int, float))
    if not ok:
        wanted = " or ".join("none" if k is type(None) else k.__name__ for k in kinds)
        return f"{flag(name)} must be {wanted}, got {value!r}"[:300]
    return None


def number_problem(args) -> str | None:
    """Why the numbers of `args` cannot be used, or None: NaN or infinite floats, integers past
    int64, seeds outside what NumPy, torch and EnvPool accept, a time limit that is not positive,
    an integer past the C type that receives it (`C_INT_FLAGS`)."""
    values = args if isinstance(args, dict) else vars(args)
    seed = values.get("seed")
    if isinstance(seed, int):
        envs = values.get("num_envs", 1)
        envs = envs if isinstance(envs, int) and 0 < envs < SEED_LIMIT else 1
        # a training run's evaluation plays one env with seed + 1 (`after_training`)
        games = max(envs, 2) if "total_timesteps" in values else envs
        if not 0 <= seed <= SEED_LIMIT - games:
            return (
                f"--seed must be between 0 and {SEED_LIMIT - games} (env i plays with seed + i, "
                f"the evaluation with seed + 1, below 2**31), got {seed}"
            )
    steps = values.get("max_episode_steps")
    if isinstance(steps, int) and steps <= 0:
        return f"--max-episode-steps must be positive, got {steps}"
    for name, (limit, why) in C_INT_FLAGS.items():
        value = values.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            return f"{flag(name)} must be at most {limit} ({why}), got {value}"
    for name, value in values.items():
        if isinstance(value, float) and not math.isfinite(value):
            return f"{flag(name)} must be a finite number, got {value}"
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT_LIMIT:
            return f"{flag(name)} {value} is too large (at most {INT_LIMIT - 1})"
    return None


def available_memory() -> int | None:
    """The bytes of memory this process may still take: the system's available memory, or the
    cgroup's limit (a container, a SLURM job) when smaller; None where neither can be read."""
    found = []
    with contextlib.suppress(OSError, ValueError):
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    with contextlib.suppress(OSError, ValueError):
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        if limit != "max":
            used = int(open("/sys/fs/cgroup/memory.current").read())
            found.append(int(limit) - used)
    return min(found) if found else None


def gigabytes(n: float) -> str:
    return f"{n / 1e9:,.1f} GB"


def memory_problem(num_envs: int, num_steps: int, available: int | None) -> str | None:
    """Why the rollout buffers and envs of these sizes cannot fit in `available` bytes, or None."""
    need = num_envs * num_steps * TRANSITION_BYTES + num_envs * ENV_BYTES
    if available is None or need <= available:
        return None
    return (
        f"--num-envs {num_envs} x --num-steps {num_steps}: the rollout buffers and envs need "
        f"about {gigabytes(need)}, more than the {gigabytes(available)} of memory available"
    )


def check_ppo_args(args, whole_sequences: bool = False) -> None:
    """The batch arithmetic that every PPO script in cleanrl/ relies on, the numbers
    (`number_problem`: the values a resumed run takes from its checkpoint too) and the memory the
    rollout needs (what `--upload-model` needs is checked by `Run`); `whole_sequences`: the
    minibatches are made of whole env sequences (the LSTM's), so they must divide the envs."""
    problem = number_problem(args)
    if problem:
        fail(problem)
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs"):
        value = getattr(args, name)
        if value <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {value}")
    for name in ("learning_rate", "clip_coef", "max_grad_norm"):
        value = getattr(args, name)
        if value < 0:
            fail(f"{flag(name)} must not be negative, got {value}")
    for name in ("gamma", "gae_lambda"):  # (past 1 the future weighs more than now: no return)
        value = getattr(args, name)
        if not 0 <= value <= 1:
            fail(f"{flag(name)} must be between 0 and 1 (a discount factor), got {value}")
    if args.eval_episodes <= 0:
        fail(f"--eval-episodes must be positive, got {args.eval_episodes}")
    if args.checkpoint_every < 0:
        fail(f"--checkpoint-every must be 0 (off) or positive, got {args.checkpoint_every}")
    if getattr(args, "cudagraphs", False):
        import torch

        if not (args.cuda and torch.cuda.is_available()):
            fail("--cudagraphs needs a CUDA GPU (and --cuda); torch sees none here")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(
            f"--num-minibatches {args.num_minibatches} does not divide the batch "
            f"(num_envs * num_steps = {args.num_envs} * {args.num_steps} = {batch_size})"
        )
    if whole_sequences and args.num_envs % args.num_minibatches:
        fail(
            f"--num-minibatches {args.num_minibatches} does not divide --num-envs {args.num_envs}:"
            " the LSTM's minibatches are made of whole env sequences"
        )
    if args.total_timesteps < batch_size:
        fail(
            f"--total-timesteps {args.total_timesteps} is smaller than one batch "
            f"(num_envs * num_steps = {batch_size}): nothing would be trained"
        )
    # the JAX scripts' learning-rate schedule divides by these in int32, under `jax.jit`
    if args.total_timesteps // batch_size > C_INT:
        fail(
            f"--total-timesteps {args.total_timesteps} is more than {C_INT} iterations of one "
            f"batch (num_envs * num_steps = {batch_size}): the iterations are counted in a C int"
        )
    if args.num_minibatches * args.update_epochs > C_INT:
        fail(
            f"--num-minibatches {args.num_minibatches} x --update-epochs {args.update_epochs} "
            f"is more than {C_INT} gradient steps an iteration (counted in a C int)"
        )
    problem = memory_problem(args.num_envs, args.num_steps, available_memory())
    if problem:
        fail(problem)


def steps_note(total_timesteps: int, num_envs: int, num_steps: int) -> str | None:
    """What is trained when `total_timesteps` is not a whole number of batches (the iterations
    are whole batches: the rest is not trained), or None when it is; `Run.start` says it, once
    the input is checked."""
    batch_size = num_envs * num_steps
    trained = total_timesteps // batch_size * batch_size
    if trained == total_timesteps:
        return None
    return (
        f"training {trained:,} steps, {trained // batch_size:,} iterations of {batch_size:,}: "
        f"--total-timesteps {total_timesteps:,} is not a whole number of batches (num_envs * "
        f"num_steps = {num_envs} * {num_steps})"
    )
