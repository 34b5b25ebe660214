"""What pytest itself takes from this folder: the test session's setup and the fixtures every
test module gets. Test modules share helpers through the `*_testing.py` modules beside it
(`scripts_testing`: scripts run as processes; `logs_testing`: what a run logged;
`background_testing`: `@in_background`), never by importing this file or another test module
(tests/test_layout.py)."""

from __future__ import annotations

import inspect
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest
from background_testing import background_bodies_of

# A test session started in the background by a script (`pytest &`) inherits SIGINT ignored, and
# so would every process the tests start: the Ctrl-C tests need it as a terminal delivers it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module", autouse=True)
def background_bodies(request, tmp_path_factory):
    """Starts the `in_background` bodies of the module's selected tests; waits for them at the
    module's end (a body stops itself: each has its own timeouts)."""
    bodies = background_bodies_of(request.module.__name__)
    items = [i for i in request.session.items if getattr(i, "module", None) is request.module]
    selected = sorted({item.originalname for item in items} & set(bodies))
    if not selected:
        yield {}
        return
    with ThreadPoolExecutor(max_workers=len(selected)) as threads:
        futures = {}
        for name in selected:
            kwargs = {
                arg: tmp_path_factory.mktemp(name[5:35])
                if arg == "tmp_path"
                else request.getfixturevalue(arg)
                for arg in inspect.signature(bodies[name]).parameters
            }
            futures[name] = threads.submit(bodies[name], **kwargs)
        yield futures
