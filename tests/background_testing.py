"""`in_background`: a test that mostly waits runs from its module's first test, in a thread of
its own (the fixture that starts and waits for the bodies is `background_bodies`, in
conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

_BACKGROUND: dict[str, dict[str, Callable]] = {}  # module name: {test name: body}


def in_background(body: Callable) -> Callable:
    """A test whose body starts with its module's first test, in a thread of its own, instead
    of in its turn: for a test that mostly waits (on script start-ups, a scheduler, a requeue, a
    checkpoint to appear), so that its waits overlap the module's other tests. The body's
    arguments are `tmp_path` (a folder of its own) and module-scoped fixtures; it must leave the
    test process's global state alone (no monkeypatch, no chdir). The test itself waits for its
    body and fails with what the body raised."""
    _BACKGROUND.setdefault(body.__module__, {})[body.__name__] = body

    def test(background_bodies):
        background_bodies[body.__name__].result()

    test.__name__ = test.__qualname__ = body.__name__
    test.__module__, test.__doc__ = body.__module__, body.__doc__
    return test


def background_bodies_of(module_name: str) -> dict[str, Callable]:
    """The `in_background` bodies of a test module: test name -> body."""
    return _BACKGROUND.get(module_name, {})
