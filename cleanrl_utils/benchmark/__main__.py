"""`python -m cleanrl_utils.benchmark`: see `cli.py` and docs/benchmark_launcher.md."""

import sys

from cleanrl_utils.benchmark.cli import main

if __name__ == "__main__":
    sys.exit(main())
