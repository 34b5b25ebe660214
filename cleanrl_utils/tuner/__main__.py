import sys

from cleanrl_utils.tuner.cli import main

sys.exit(main())
