"""A run whose training diverged: what a checkpoint would keep, checked for NaN and infinite values
at the end of every iteration (a checkpoint of them would be useless, and would push the last
finite one out), and the one line that ends the run, naming the iteration and the newest
checkpoint, the last finite one. `cleanrl_utils.run.Run` raises it as a `RunError` (exit code 1):
from `end_iteration`, or in place of the crash that non-finite values cause inside an iteration
(torch's `Categorical` refuses NaN logits in the update or the next rollout; JAX plays on). Such
a crash can come of parameters still finite (a first step of a huge learning rate makes them
1e6, and the next forward pass overflows), so the crash's own words count too
(`crash_values`), whether or not an iteration has ended yet."""

from __future__ import annotations

import functools
import re
import sys

import numpy as np

from cleanrl_utils.files.state_file import checkpoint_path


def _float_arrays(value) -> list:
    """The floating-point tensors and arrays that `value` holds: a torch module's parameters and
    buffers, an optimizer's state, a tensor; a JAX pytree's leaves (a flax `TrainState`: the
    parameters and the optimizer's state), a NumPy array. Not deques or numbers."""
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(value, torch.nn.Module):
            tensors = [*value.parameters(), *value.buffers()]
        elif isinstance(value, torch.optim.Optimizer):
            tensors = [t for state in value.state.values() for t in state.values()]
        else:
            tensors = [value]
        tensors = [t for t in tensors if torch.is_tensor(t) and t.is_floating_point()]
        if tensors:
            return tensors
    jax = sys.modules.get("jax")
    leaves = jax.tree_util.tree_leaves(value) if jax is not None else [value]
    return [
        leaf
        for leaf in leaves
        if hasattr(leaf, "dtype")
        and hasattr(leaf, "shape")
        and np.issubdtype(leaf.dtype, np.inexact)
    ]


def _all_finite(arrays: list) -> bool:
    """Whether every value of `arrays` is finite, read back once (a GPU waits once)."""
    torch, jax = sys.modules.get("torch"), sys.modules.get("jax")
    is_tensor = torch.is_tensor if torch is not None else lambda _: False
    tensors = [a for a in arrays if is_tensor(a)]
    others = [a for a in arrays if not is_tensor(a)]
    if tensors and not bool(torch.stack([torch.isfinite(t).all() for t in tensors]).all()):
        return False
    if jax is not None and others:
        return bool(jax.device_get(_jax_all_finite()(others)))
    return all(np.isfinite(a).all() for a in others)


@functools.cache
def _jax_all_finite():
    """One compiled check of all the leaves, compiled once a run (the same leaves every
    iteration) where an `isfinite` and an `all` per leaf compile programs per leaf shape (an
    Atari agent's 36 leaves: 0.55 CPU-s instead of 0.85, measured on a CPU)."""
    jnp = sys.modules["jax"].numpy
    return sys.modules["jax"].jit(
        lambda leaves: jnp.all(jnp.stack([jnp.isfinite(a).all() for a in leaves]))
    )


def not_finite(state: dict) -> list[str]:
    """The names of the entries of `state` (as a script gives it to `Run.end_iteration`) that
    hold a NaN or an infinite value; empty when every value is finite."""
    return [name for name, value in state.items() if not _all_finite(_float_arrays(value))]


# what torch says of the non-finite values it refuses: a distribution's parameter (`Categorical`'s
# logits: only NaN or infinite ones break its constraint), or the probabilities sampled from
NON_FINITE_CRASHES = (
    re.compile(r"Expected parameter (\w+) .*? but found invalid values:.*\b(nan|inf)\b", re.S),
    re.compile(r"probability tensor contains either `inf`, `nan` or element < 0"),
)


def crash_values(crash: BaseException | None) -> str | None:
    """What a crash inside an iteration (or one it was raised from) says is NaN or infinite, as
    the diverged line names it (`the agent's output (logits)`), or None when it says no such
    thing: a crash of something else is left as it is."""
    seen = set()
    while crash is not None and id(crash) not in seen:
        seen.add(id(crash))
        for pattern in NON_FINITE_CRASHES:
            if match := pattern.search(str(crash)):
                named = match.group(1) if pattern.groups else "action probabilities"
                return f"the agent's output ({named})"
        crash = crash.__cause__ or crash.__context__
    return None


def diverged_line(run, iteration: int, names: list[str]) -> str:
    """What ends a diverged run: the iteration, what is not finite, and what is kept: the newest
    checkpoint, which `end_iteration` wrote only of finite values, to continue from with other
    flags (a smaller learning rate); or that none was written."""
    lr = getattr(run.args, "learning_rate", None)
    hint = f" (a learning rate too large? --learning-rate {lr})" if lr is not None else ""
    if run.checkpoints.newest is None:
        kept = "no checkpoint was written, so nothing is kept to continue from"
    else:
        done = run.checkpoints.newest[0]
        kept = (
            f"the newest checkpoint, of iteration {done} ({checkpoint_path(run.dir, done)}), holds "
            f"finite values: continue from it with other flags ({run.resume_command()} "
            "--learning-rate ...)"
        )
    return (
        f"iteration {iteration}: the training diverged: {', '.join(names)} "
        f"{'holds' if len(names) == 1 else 'hold'} NaN or infinite values{hint}; {kept}"
    )
