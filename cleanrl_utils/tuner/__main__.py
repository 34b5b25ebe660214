"""`python -m cleanrl_utils.tuner`: see `cli.py` and docs/tuning.md."""

import sys

from cleanrl_utils.console import extras, output
from cleanrl_utils.tuner.cli import main

if __name__ == "__main__":
    output.guard()  # a lost stdout or stderr (a full disk, `| head`, `2>&-`): said, not a traceback
    extras.install()  # a missing optional package: one line naming its install command
    sys.exit(main())
