"""Helpers for the tests of resumed runs (tests/test_resume.py, tests/test_multigpu.py)."""

from __future__ import annotations

import numpy as np


def game_independent_state(payload: dict) -> dict:
    """What a run at an iteration holds whatever games it played: its position, its RNGs (a fixed
    number of draws per iteration), the optimizer's step count and the JAX keys."""
    rng, state = payload["rng"], payload["state"]
    out = {
        "iteration": payload["iteration"],
        "global_step": payload["global_step"],
        "python": rng["python"],
        "numpy": [np.asarray(x).tolist() for x in rng["numpy"]],
    }
    if "torch" in rng:
        out["torch"] = np.asarray(rng["torch"]).tolist()
    if "optimizer" in state:
        out["adam_steps"] = [float(s["step"]) for s in state["optimizer"]["state"].values()]
    else:
        out["adam_steps"] = int(state["agent_state"]["step"])
        out["keys"] = [np.asarray(state[k]).tolist() for k in ("key", "rollout_key")]
    return out
