"""Diagnostics the scripts log that are not part of the algorithm."""

from __future__ import annotations

import numpy as np


def to_numpy(x) -> np.ndarray:
    """A torch tensor (on any device), a JAX or NumPy array, as a NumPy array."""
    return np.asarray(x.cpu() if hasattr(x, "cpu") else x)


def explained_variance(values, returns, valids=None) -> float:
    """`losses/explained_variance`: 1 - Var(returns - values) / Var(returns) over the rollout (over
    its valid transitions, given `valids`): 1 when the value function predicts the returns, 0 or
    less when it explains nothing of them; nan when the returns do not vary."""
    y_pred, y_true = to_numpy(values).reshape(-1), to_numpy(returns).reshape(-1)
    if valids is not None:
        mask = to_numpy(valids).reshape(-1).astype(bool)
        y_pred, y_true = y_pred[mask], y_true[mask]
    var_y = np.var(y_true)
    return np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
