from cleanrl_utils.console import extras, output
from cleanrl_utils.evals import main

output.guard()  # a lost stdout or stderr (a full disk, `| head`, `2>&-`): said, not a traceback

extras.install()  # a missing optional package: one line naming its install command
main()
