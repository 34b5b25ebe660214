"""Imported first by the scripts of `cleanrl/`, and only by entry points: it makes a missing
optional dependency one line naming the install command, not a traceback (`extras.install`, which
replaces `sys.excepthook`). The rest of `cleanrl_utils` changes no global state when imported; the
`python -m` tools call `extras.install()` in their `__main__`, since they import their optional
packages only where they use them."""

from cleanrl_utils import extras

extras.install()
