"""What pytest itself takes from this folder: the test session's setup. Test modules share
helpers through the `*_testing.py` modules beside it (`scripts_testing`: scripts run as
processes; `logs_testing`: what a run logged), never by importing this file or another test
module (tests/test_layout.py)."""

from __future__ import annotations

import signal

# A test session started in the background by a script (`pytest &`) inherits SIGINT ignored, and
# so would every process the tests start: the Ctrl-C tests need it as a terminal delivers it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
