"""Pushing a run to the Hugging Face Hub: its repository folder (`repo.py`) as one commit to
`{entity}/{env_id}-{exp_name}-seed{seed}`, through `huggingface_hub`'s own client.

The calls: `whoami` (when no entity is given: the token's user), `create_repo(exist_ok=True)`,
then `create_commit` with every file of the folder (the client asks the Hub's pre-upload
endpoint how to send each one). A transient failure (no connection, a timeout, HTTP 408, 429 or
5xx) is retried, waiting `retry_wait`, then twice as long each time; anything else, or the last
failure, is one line: exit code 2 for a refused token or permission (401, 403, 404), 1 for the
rest. The run is never touched: a failed push is pushed again with
`python -m cleanrl_utils.huggingface RUN_DIR`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import tyro

from cleanrl_utils.checks.args import parse_args
from cleanrl_utils.checks.hub import hub_problem, repo_name
from cleanrl_utils.console.errors import FAILED, USAGE_ERROR, RunError, entry_point, fail
from cleanrl_utils.huggingface.repo import build_repo_folder, run_config

RETRY_STATUS = {408, 429, 500, 502, 503, 504}
REFUSED_STATUS = {401, 403, 404}
NETWORK_MODULES = ("httpx", "httpcore", "requests", "urllib3", "http.client", "socket", "ssl")


class PushError(RunError):
    """The Hub's refusal or failure of a push (`hub_call`): a `RunError` of its own because the
    callers of `push_run` catch it, and only it, to add where the run is and how to push it
    again (after training, once the run is closed finished); `push_run`'s other `RunError`s (a
    run folder it cannot make a repository of) are said as they are."""


def status_of(exc: Exception) -> int | None:
    return getattr(getattr(exc, "response", None), "status_code", None)


def is_transient(exc: Exception) -> bool:
    status = status_of(exc)
    if status is not None:
        return status in RETRY_STATUS
    return isinstance(exc, (ConnectionError, TimeoutError)) or type(exc).__module__.startswith(
        NETWORK_MODULES
    )


def one_line(exc: Exception) -> str:
    """An error of the Hub client in one line: the HTTP status and the server's message."""
    status = status_of(exc)
    if status is None:
        first = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {first[0] if first else ''}".rstrip(": ")
    reason = getattr(exc.response, "reason_phrase", "") or ""
    message = getattr(exc, "server_message", None) or str(exc).strip().splitlines()[0]
    return f"HTTP {status} {reason}: {' '.join(str(message).split())}"


def hub_call(call, where: str, retries: int, retry_wait: float):
    """`call()`, retried after a transient failure; `PushError` (its message, exit code 2 for a
    refusal, else 1) when it fails for good. `where`: what the messages call the Hub or the
    repository."""
    for attempt in range(retries + 1):
        try:
            return call()
        except Exception as exc:
            if is_transient(exc) and attempt < retries:
                delay = retry_wait * 2**attempt
                print(
                    f"warning: the push to {where} failed ({one_line(exc)}); "
                    f"trying again in {delay:g} s ({attempt + 1} of {retries} retries)",
                    file=sys.stderr,
                    flush=True,
                )
                time.sleep(delay)
                continue
            if status_of(exc) in REFUSED_STATUS:
                raise PushError(
                    f"the Hub refused the push to {where} ({one_line(exc)}): check the token "
                    "(`hf auth login`) and that it may write there",
                    USAGE_ERROR,
                ) from None
            tries = f" after {attempt + 1} tries" if attempt else ""
            raise PushError(
                f"the push to {where} failed{tries} ({one_line(exc)})", FAILED
            ) from None
    raise AssertionError("unreachable")


def commit_folder(folder: Path, repo_id: str, message: str) -> str:
    """Creates the repository if needed and commits every file of `folder` to it, at once."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    api.create_repo(repo_id, exist_ok=True)
    operations = [
        CommitOperationAdd(path_in_repo=p.relative_to(folder).as_posix(), path_or_fileobj=p)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    ]
    api.create_commit(repo_id, operations, commit_message=message)
    return f"{api.endpoint}/{repo_id}"


def push_run(
    run_dir: Path,
    entity: str | None = None,
    episodic_returns: list[float] | None = None,
    video_dir: str | Path | None = None,
    output_dir: str | Path | None = None,
    dry_run: bool = False,
    retries: int = 3,
    retry_wait: float = 2.0,
) -> str:
    """Builds the run's repository folder (in `output_dir`, kept, or a temporary folder) and
    pushes it (not with `dry_run`) to `entity` (None: the token's user); returns the
    repository's URL, or the folder's path with `dry_run`. Raises `PushError` when the Hub
    refuses or fails, `RunError` when the run folder cannot be pushed."""
    args = run_config(Path(run_dir))["args"]
    if entity is None and not dry_run:
        from huggingface_hub import HfApi

        entity = hub_call(lambda: HfApi().whoami()["name"], "the Hub", retries, retry_wait)
    repo_id = f"{entity or 'ENTITY'}/{repo_name(args)}"
    with tempfile.TemporaryDirectory(prefix="cleanrl-hub-") as tmp:
        folder = Path(output_dir) if output_dir is not None else Path(tmp)
        build_repo_folder(run_dir, folder, repo_id, episodic_returns, video_dir)
        if dry_run:
            return str(folder)
        message = f"{args['exp_name']} on {args['env_id']}, seed {args['seed']}"
        return hub_call(
            lambda: commit_folder(folder, repo_id, message), repo_id, retries, retry_wait
        )


def retry_command(run_dir: Path, entity: str | None) -> str:
    flag = f" --hf-entity {entity}" if entity else ""
    return f"python -m cleanrl_utils.huggingface {run_dir}{flag}"


@dataclass
class PushArgs:
    """Push a finished run (trained with --save-model or --upload-model) to the Hugging Face Hub,
    as `{entity}/{env_id}-{exp_name}-seed{seed}`: the model, its card, the TensorBoard log, the
    evaluation videos, the training script and the pinned requirements, in one commit."""

    run_dir: Annotated[str, tyro.conf.Positional]
    """the run folder (`runs/{run_name}`)"""
    hf_entity: str | None = None
    """the user or organisation to push to (default: the token's user)"""
    video_dir: str | None = None
    """the evaluation videos (default: `videos/{run_name}` beside the run's `runs/` folder)"""
    output_dir: str | None = None
    """also write the repository folder here, and keep it"""
    dry_run: bool = False
    """only write the repository folder (into `--output-dir`): push nothing"""
    retries: int = 3
    """how many times a transient failure (no connection, HTTP 429 or 5xx) is retried"""
    retry_wait: float = 2.0
    """the seconds before the first retry, doubled before each next one"""


@entry_point()
def main(argv=None) -> str:
    args = parse_args(PushArgs, argv, prog="python -m cleanrl_utils.huggingface")
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        fail(f"no such run folder: {run_dir}")
    if args.dry_run and args.output_dir is None:
        fail("--dry-run writes the repository folder into --output-dir: give one")
    if args.output_dir is not None and Path(args.output_dir).resolve() == run_dir.resolve():
        fail(
            f"--output-dir {args.output_dir} is the run folder itself: the repository's files "
            f"would be written over the run's; give another folder (hub/{run_dir.name})"
        )
    if args.retries < 0 or args.retry_wait < 0:
        fail("--retries and --retry-wait must not be negative")
    problem = hub_problem(run_config(run_dir)["args"], args.hf_entity, need_token=not args.dry_run)
    if problem:
        fail(problem)
    try:
        where = push_run(
            run_dir,
            args.hf_entity,
            video_dir=args.video_dir,
            output_dir=args.output_dir,
            dry_run=args.dry_run,
            retries=args.retries,
            retry_wait=args.retry_wait,
        )
    except PushError as exc:
        fail(f"{exc}; nothing changed in {run_dir}", exc.code)
    print(f"repository folder written to {where}" if args.dry_run else f"pushed to {where}")
    return where
