"""Helpers for the tests of each script's bad input (tests/test_checks.py, tests/test_huggingface.py):
the checks each script's `__main__` makes, run in-process against the script's own `Args`."""

from __future__ import annotations

import importlib

import pytest

from cleanrl_utils.checks.args import check_ppo_args
from cleanrl_utils.checks.env_ids import (
    check_ale_vector_id,
    check_envpool_atari_id,
    check_gymnasium_atari_id,
)
from cleanrl_utils.console.errors import entry_point

ENVPOOL = "ppo_atari_envpool"
GYMNASIUM = "ppo_atari"
LSTM = "ppo_atari_lstm"
XLA_JAX = "ppo_atari_envpool_xla_jax"
XLA_JAX_SCAN = "ppo_atari_envpool_xla_jax_scan"
ALE_VECTOR = "ppo_atari_ale_vector"
# the checks each script's __main__ makes, in this order: check_ppo_args(args, whole_sequences),
# then the env id
SCRIPT_CHECKS = {
    ENVPOOL: (False, check_envpool_atari_id),
    GYMNASIUM: (False, check_gymnasium_atari_id),
    LSTM: (True, check_gymnasium_atari_id),  # minibatches of whole env sequences
    XLA_JAX: (False, check_envpool_atari_id),
    XLA_JAX_SCAN: (False, check_envpool_atari_id),
    ALE_VECTOR: (False, check_ale_vector_id),
}


def script_args(script: str, **flags):
    """The script's own `Args`, with `flags` (as its command line would give them)."""
    return importlib.import_module(f"cleanrl.{script}").Args(**flags)


def check_script_args(script: str, args) -> None:
    whole_sequences, check_env_id_of_script = SCRIPT_CHECKS[script]
    check_ppo_args(args, whole_sequences=whole_sequences)
    check_env_id_of_script(args.env_id)


def usage_error(capsys, script: str, **flags) -> str:
    """The one `error:` line with which the script's checks reject `flags` (exit code 2)."""
    args = script_args(script, **flags)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info, entry_point():
        check_script_args(script, args)
    assert exit_info.value.code == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert out == "" and "Traceback" not in err
    return lines[0]
