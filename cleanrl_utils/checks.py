"""Bad input is caught before any environment is built: one clear line and exit code 2."""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterable

# (INTERRUPTED and stops_on_ctrl_c: still importable from here, where the entry points took them)
from cleanrl_utils.exits import INTERRUPTED, USAGE_ERROR, stops_on_ctrl_c  # noqa: F401


def fail(message: str, code: int = USAGE_ERROR):
    """Print `error: message` to stderr and exit, with no traceback."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(code)


def check_ppo_args(args, whole_sequences: bool = False) -> None:
    """The batch arithmetic that every PPO script in cleanrl/ relies on (what `--upload-model`
    needs is checked by `Run`); `whole_sequences`: the minibatches are made of whole env
    sequences (the LSTM's), so they must divide the envs."""
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs"):
        value = getattr(args, name)
        if value <= 0:
            fail(f"--{name.replace('_', '-')} must be positive, got {value}")
    for name in ("learning_rate", "gamma", "gae_lambda", "clip_coef", "max_grad_norm"):
        value = getattr(args, name)
        if value < 0:
            fail(f"--{name.replace('_', '-')} must not be negative, got {value}")
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


def game_of(env_id: str) -> str:
    """`Pong-v5`, `PongNoFrameskip-v4`, `ALE/Pong-v5` -> `pong`: the game, whatever the id style."""
    name = env_id.rpartition("/")[2]
    return re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name).lower()


def check_env_id(env_id: str, known: Iterable[str], library: str) -> None:
    known = list(known)
    if env_id in known:
        return
    # the same game in the other id style first (`Pong-v5` given to a gymnasium script)
    same_game = [k for k in known if game_of(k) == game_of(env_id)]
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
    suggestions = list(dict.fromkeys(same_game[:1] + close))[:3]
    hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
    fail(f"unknown env id {env_id!r} for {library}{hint}")


def check_envpool_atari_id(env_id: str) -> None:
    """Only EnvPool's Atari ids: its other games (CartPole, MuJoCo, ...) have no lives or frames."""
    import envpool
    from envpool.registration import registry

    atari_ids = [i for i in envpool.list_all_envs() if registry.specs[i][0] == "envpool.atari"]
    check_env_id(env_id, atari_ids, "EnvPool's Atari games")


def check_gymnasium_atari_id(env_id: str) -> None:
    """Only the ALE ids without frame skip (`*NoFrameskip-v4`): the scripts skip frames themselves."""
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    atari_ids = [  # (the `NoFrameskip-v0` ids repeat an action with probability 0.25)
        i
        for i, spec in gym.registry.items()
        if spec.entry_point == "ale_py.env:AtariEnv"
        and spec.kwargs.get("frameskip") == 1
        and spec.kwargs.get("repeat_action_probability", 0.0) == 0.0
    ]
    check_env_id(env_id, atari_ids, "gymnasium's Atari games without frame skip")
