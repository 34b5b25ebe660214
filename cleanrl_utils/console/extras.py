"""A missing optional dependency is one line naming the install command, not a traceback.

The scripts import `cleanrl_utils.entry` before their third-party packages (the project's import
order puts first-party imports first), which installs `missing_extra_hook` as `sys.excepthook`, as
the `python -m` tools do with `install()`: a `ModuleNotFoundError` for a module of one of the
project's extras that no one catches then prints `error: ... pip install ...` and exits with code
2, also for `--help`. Importing this module changes nothing.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from cleanrl_utils.console.errors import USAGE_ERROR

# module -> the extra that installs it (pyproject.toml's [project.optional-dependencies])
EXTRA_OF = {
    "envpool": "envpool",
    "ale_py": "atari",
    "cv2": "atari",
    "jax": "jax",
    "jaxlib": "jax",
    "flax": "jax",
    "optax": "jax",
    "imageio": "video",
    "imageio_ffmpeg": "video",
    "matplotlib": "report",
    "huggingface_hub": "hub",
    "optuna": "optuna",
}
# the command that installs an extra, pinned (the first line of its requirements file says so too)
INSTALL = {
    "envpool": 'pip install -r requirements/requirements-envpool.txt -e ".[envpool]"',
    "atari": 'pip install -r requirements/requirements-atari.txt -e ".[atari]"',
    "jax": 'pip install -r requirements/requirements-jax.txt -e ".[envpool,jax]"',
    "video": 'pip install -r requirements/requirements-video.txt -e ".[video]"',
    "report": 'pip install -r requirements/requirements-report.txt -e ".[report]"',
    "hub": 'pip install -r requirements/requirements-hub.txt -e ".[hub]"',
    "optuna": 'pip install -r requirements/requirements-optuna.txt -e ".[optuna]"',
}


# the flags whose work needs an extra, checked before any work (`missing_flag_extra`);
# --upload-model's needs, a token among them, are `cleanrl_utils.checks.hub`'s
FLAG_EXTRAS = {"capture_video": "video"}


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_flag_extra(args) -> str | None:
    """Why a flag of `args` cannot do its work here: the extra it needs is not installed (the
    install command named, as for a missing script extra); None when nothing is missing. Asked
    before any work: `--capture-video` records the games after training, hours later."""
    for name, extra in FLAG_EXTRAS.items():
        if not getattr(args, name, False):
            continue
        missing = [m for m, e in EXTRA_OF.items() if e == extra and not installed(m)]
        if missing:
            return (
                f"--{name.replace('_', '-')} needs the `{extra}` extra (no module named "
                f"{missing[0]!r}); install it from the repository root with: {INSTALL[extra]}"
            )
    return None


def missing_extra(exc: BaseException) -> str | None:
    """The one-line message for an exception that is a missing extra's module, else None."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    module = exc.name.partition(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return None
    if exc.name != module and installed(module):  # (ale-py 0.10 has no `ale_py.vector_env`)
        version = getattr(sys.modules.get(module), "__version__", "of another version")
        return (
            f"error: {program_name()} needs a newer {module} than the one installed ({version}: "
            f"no module named {exc.name!r}); install the `{extra}` extra's pinned versions from "
            f"the repository root with: {INSTALL[extra]}"
        )
    return (
        f"error: {program_name()} needs the `{extra}` extra (no module named {module!r}); install it "
        f"from the repository root with: {INSTALL[extra]}"
    )


def program_name() -> str:
    """The program as the user typed it: `python -m cleanrl_utils.evals` for a module run with
    -m (whose `sys.argv[0]` is the path of its `__main__.py` or module file), else the script's
    file name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return f"python -m {spec.name.removesuffix('.__main__')}"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "this"


def missing_extra_hook(exc_type, exc, traceback, previous=sys.excepthook) -> None:
    message = missing_extra(exc)
    if message is None or hasattr(sys, "ps1"):  # (an interactive session goes on)
        previous(exc_type, exc, traceback)
        return
    print(message, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(USAGE_ERROR)  # (an excepthook cannot choose the exit code otherwise)


def install() -> None:
    if sys.excepthook is not missing_extra_hook and sys.excepthook is sys.__excepthook__:
        sys.excepthook = missing_extra_hook
