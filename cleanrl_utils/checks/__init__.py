"""Bad input, found before any work starts: the command line and the numbers it gives (`args`),
env ids (`env_ids`), folders a command writes into (`paths`), what `--upload-model` needs
(`hub`). Each check has a problem function (a line, or None) and its raising form.

The checks a training script makes are named here, so that it imports them in one line:
`from cleanrl_utils.checks import check_envpool_atari_id, check_ppo_args, parse_args`."""

from cleanrl_utils.checks.args import check_ppo_args, parse_args
from cleanrl_utils.checks.env_ids import (
    check_ale_vector_id,
    check_envpool_atari_id,
    check_gymnasium_atari_id,
)

__all__ = [
    "check_ale_vector_id",
    "check_envpool_atari_id",
    "check_gymnasium_atari_id",
    "check_ppo_args",
    "parse_args",
]
