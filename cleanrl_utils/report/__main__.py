"""`python -m cleanrl_utils.report`: see `cli.py` and docs/report.md."""

import sys

from cleanrl_utils import extras
from cleanrl_utils.report.cli import main

if __name__ == "__main__":
    extras.install()  # a missing optional package: one line naming its install command
    sys.exit(main())
