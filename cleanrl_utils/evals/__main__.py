from cleanrl_utils import extras
from cleanrl_utils.evals import main

extras.install()  # a missing optional package: one line naming its install command
main()
