"""Bad input, found before any work starts: the command line and the numbers it gives (`args`),
env ids (`env_ids`), folders a command writes into (`paths`), what `--upload-model` needs
(`hub`). Each check has a problem function (a line, or None) and its raising form."""
