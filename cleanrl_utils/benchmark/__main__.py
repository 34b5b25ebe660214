"""`python -m cleanrl_utils.benchmark`: see `cli.py` and docs/benchmark_launcher.md."""

import sys

from cleanrl_utils.benchmark.cli import main
from cleanrl_utils.console import extras, output

if __name__ == "__main__":
    output.guard()  # a lost stdout or stderr (a full disk, `| head`, `2>&-`): said, not a traceback
    extras.install()  # a missing optional package: one line naming its install command
    sys.exit(main())
