"""`python -m cleanrl_utils.report`: see `cli.py` and docs/report.md."""

import sys

from cleanrl_utils.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
