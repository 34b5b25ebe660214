"""What pytest itself takes from this folder: the test session's setup. Test modules share
helpers through the `*_testing.py` modules beside it (`scripts_testing`: scripts run as
processes; `logs_testing`: what a run logged), never by importing this file or another test
module (tests/test_layout.py)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

import pytest

# A test session started in the background by a script (`pytest &`) inherits SIGINT ignored, and
# so would every process the tests start: the Ctrl-C tests need it as a terminal delivers it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def stop_signals_restored():
    """Library code run in a test may ignore SIGTERM (a rank's last words before `os._exit`,
    faked in process): left so, the worker would pass it on to every process it starts later,
    and their stop tests would wait for a signal that never arrives. Each test's end puts the
    stop signals' handlers back."""
    stops = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1)
    saved = {signum: signal.getsignal(signum) for signum in stops}
    yield
    for signum, handler in saved.items():
        if handler is not None and signal.getsignal(signum) != handler:
            signal.signal(signum, handler)


def pytest_collection_finish(session):
    """In an xdist worker under `--dist loadgroup`: every test with an `xdist_group` mark must
    carry its group in its node id, which is all the scheduler reads. pytest 9.2 ignores the
    suffix that pytest-xdist 3.8 writes (pytest-dev/pytest-xdist#1386): the groups are then split
    silently, and each worker starts a module's runs again (twice the CPU of the suite)."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    split = [
        item.nodeid
        for item in session.items
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rsplit("]", 1)[-1]
    ]
    if split:
        raise pytest.UsageError(
            f"--dist loadgroup does not group tests with pytest {pytest.__version__} and "
            f"pytest-xdist (e.g. {split[0]}): install the pins of requirements/requirements-dev.txt"
        )


# XLA's CPU compiler without its costly optimisation passes, for the session (its workers, and
# the scripts and JAX processes they start): compiling is most of a JAX test's CPU time (12% of
# test_ppo_atari_envpool_xla_jax.py's, measured), the compiled code's speed matters to no test,
# and what a test compares is compiled alike on both sides. A user's run compiles as XLA does by
# default.
QUICK_XLA = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"


def pytest_configure(config):
    """One JAX compilation cache and one torch.compile cache for the session (its xdist workers
    inherit the variables, and the scripts they start): the JAX scripts are started dozens of
    times with the same few sizes, and a process that finds its programs there skips half of its
    CPU time (XLA's compilation); a `--compile` run that finds its graphs there skips most of
    inductor's (the same functions of the same sizes in the torch scripts: tests/test_compile.py,
    test_multigpu.py). The tests see that a run compiled in its log (`TORCH_LOGS=dynamo`)."""
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:  # (in the first process: the controller)
        folder = tempfile.mkdtemp(prefix="cleanrl-tests-jax-cache-")
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # (whatever the load)
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        folder = tempfile.mkdtemp(prefix="cleanrl-tests-inductor-cache-")
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    if QUICK_XLA not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {QUICK_XLA}".strip()
    # bytecode written as Python writes it by default, by the first process that imports a module
    # (the workers, and every process they start, inherit this): where PYTHONDONTWRITEBYTECODE is
    # set (as on CI machines), each new interpreter would compile from source every module it
    # imports that has no bytecode yet: the project's (0.2 CPU seconds a process, measured; the
    # suite starts about 160 that are not forks), and, after an install with `--no-compile` (the
    # README's: pip's compilation of every package installed took half of the install's time),
    # torch's and the rest (~8 CPU seconds a process)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
