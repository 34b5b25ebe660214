"""Replay a trained agent: `python -m cleanrl_utils.enjoy --hf-repo ENTITY/REPO` downloads a run
pushed to the Hugging Face Hub (`cleanrl_utils.huggingface`: `args.json`, then the model file it
names) with `huggingface_hub`; `--model-path` takes a local model file, checkpoint or downloaded
repository folder. Either way the model is read without running any code
(`cleanrl_utils.files.model_file`: a pickle is refused), its script and env id are checked, and its
games are played by the evaluator (`cleanrl_utils.evals`), recorded as mp4 files with
`--capture-video`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cleanrl_utils.console import extras, output
from cleanrl_utils.console.errors import RunError, entry_point, fail
from cleanrl_utils.evals import evaluate_model
from cleanrl_utils.evals.common import EvalArgs, parse_eval_args
from cleanrl_utils.files.model_file import read_model


@dataclass
class EnjoyArgs(EvalArgs):
    """Replay a trained agent: a repository on the Hugging Face Hub (`--hf-repo`), or a local
    model file, checkpoint or repository folder (`--model-path`)."""

    model_path: str | None = None
    """a model file (`.cleanrl_model`), a checkpoint, or a downloaded repository folder"""
    hf_repo: str | None = None
    """a repository pushed with `--upload-model`: `ENTITY/{env_id}-{exp_name}-seed{seed}`"""
    revision: str | None = None
    """the repository's branch, tag or commit (default: main)"""
    video_dir: str = "videos/enjoy"
    """where the videos go"""


def repo_info(text: str, where: str) -> dict:
    """`args.json` of a repository folder: the script and the model file's name."""
    try:
        info = json.loads(text)
        if not isinstance(info, dict):
            raise ValueError(f"{type(info).__name__}, not an object")
        model = info.get("model")
        if not isinstance(model, str) or not model.endswith(".cleanrl_model") or "/" in model:
            raise ValueError(f"a model named {model!r}")
        for key, kind in (("args", dict), ("script", str)):
            if key in info and not isinstance(info[key], kind):
                shown = f"{info[key]!r:.60}"
                raise ValueError(
                    f'its "{key}" is {shown}, not {"an object" if kind is dict else "a string"}'
                )
    except ValueError as exc:
        fail(f"{where}: args.json is not one written by --upload-model ({exc})")
    return info


def download(repo_id: str, revision: str | None) -> tuple[Path, dict]:
    """The model file of a Hub repository (downloaded into huggingface_hub's cache) and its
    `args.json`; exits with one `error:` line when they cannot be had."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    from cleanrl_utils.huggingface.push import one_line

    where = f"--hf-repo {repo_id}"
    try:
        info = repo_info(
            Path(hf_hub_download(repo_id, "args.json", revision=revision)).read_text(), where
        )
        return Path(hf_hub_download(repo_id, info["model"], revision=revision)), info
    except HFValidationError as exc:
        fail(f"{where}: not a repository id ({str(exc).splitlines()[0]})")
    except RepositoryNotFoundError:
        fail(f"{where}: no such repository on {constants.ENDPOINT} (a private one needs a token)")
    except RevisionNotFoundError:
        fail(f"{where}: no revision {revision!r}")
    except LocalEntryNotFoundError as exc:  # (no connection, and nothing in the cache)
        fail(f"{where}: the download failed ({one_line(exc)})", 1)
    except EntryNotFoundError as exc:
        fail(f"{where}: not a repository pushed by --upload-model ({one_line(exc)})")
    except RunError:  # (its args.json, said by `repo_info`)
        raise
    except Exception as exc:  # the network
        fail(f"{where}: the download failed ({one_line(exc)})", 1)


@entry_point()
def main(argv=None) -> list[float]:
    args = parse_eval_args(argv, prog="python -m cleanrl_utils.enjoy", cls=EnjoyArgs)
    if (args.hf_repo is None) == (args.model_path is None):
        fail("give --hf-repo (a Hub repository) or --model-path (a local file or folder)")
    info = None
    if args.hf_repo is not None:
        path, info = download(args.hf_repo, args.revision)
    else:
        path = Path(args.model_path)
        if path.is_dir():
            if not (path / "args.json").is_file():
                fail(f"--model-path {path}: a folder without args.json (not a repository folder)")
            info = repo_info((path / "args.json").read_text(), str(path))
            path = path / info["model"]
    model = read_model(path)
    if info is not None and (info.get("script"), info.get("args", {}).get("env_id")) != (
        model.script,
        model.args["env_id"],
    ):
        fail(
            f"{path}: args.json names {info.get('script')} on {info.get('args', {}).get('env_id')}, "
            f"the model {model.script} on {model.args['env_id']}"
        )
    return evaluate_model(model, args)


if __name__ == "__main__":
    output.guard()  # a lost stdout or stderr (a full disk, `| head`, `2>&-`): said, not a traceback
    extras.install()  # a missing optional package: one line naming its install command
    main()
