"""What an upload needs before any work is done: the packages, a token, a valid repository id.

A run with `--upload-model` asks `upload_problem` when `Run` is made, before any work (a run must
not train for hours and then fail for want of a token); `python -m cleanrl_utils.huggingface`
asks `hub_problem` before building the repository folder. A base module, below `run`: it imports
nothing of this project but `extras`, and the Hub client only when asked.
"""

from __future__ import annotations

import importlib.util

from cleanrl_utils.console.extras import INSTALL

# the modules an upload needs: the Hub client, the evaluation videos, the learning-curve plot
NEEDED = ("huggingface_hub", "imageio", "matplotlib")


def repo_name(args: dict) -> str:
    """The Hub repository of a run, without its namespace: `{env_id}-{exp_name}-seed{seed}`."""
    return f"{args['env_id']}-{args['exp_name']}-seed{args['seed']}".replace("/", "-")


def repo_problem(repo_id: str) -> str | None:
    """Why `repo_id` is not a valid Hub repository id (None when it is one)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        return f"{repo_id!r} is not a valid Hugging Face repository id: {str(exc).splitlines()[0]}"
    return None


def missing_packages() -> str | None:
    missing = [module for module in NEEDED if importlib.util.find_spec(module) is None]
    if missing:
        return f"{', '.join(missing)} not installed: {INSTALL['hub']}"
    return None


def token_problem() -> str | None:
    from huggingface_hub import get_token

    if get_token() is None:
        return (
            "no Hugging Face token: log in with `hf auth login` or set HF_TOKEN (an upload needs "
            "one with write access)"
        )
    return None


def hub_problem(args: dict, entity: str | None, need_token: bool = True) -> str | None:
    """Why the run of `args` (its arguments as a dict) could not be pushed to `entity` (None: the
    token's user), found without the network: a missing package, no token, a bad entity or
    repository name. None when nothing is wrong."""
    problem = missing_packages() or (token_problem() if need_token else None)
    if problem:
        return problem
    if entity is not None and (not entity or "/" in entity):
        return f"--hf-entity {entity!r} is not a user or organisation name"
    return repo_problem(f"{entity or 'user'}/{repo_name(args)}")


def upload_problem(args) -> str | None:
    """`hub_problem` of a script's `Args` with `--upload-model` (None without it), asked when
    `Run` is made."""
    if not getattr(args, "upload_model", False):
        return None
    problem = hub_problem(vars(args), args.hf_entity)
    return f"--upload-model: {problem}" if problem else None
