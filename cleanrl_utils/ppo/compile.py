"""`--compile` and `--cudagraphs` of the torch scripts, and the fixed size of a rank's share of a
minibatch under them (`share_size`)."""

from __future__ import annotations

import math

# A rank's share of a minibatch is padded to its mean plus this many standard deviations: a
# larger share comes about once in ~1e9 minibatches (it then runs eagerly, exactly as well)
SHARE_SIGMAS = 6.0


def compiled(args, agent, *functions):
    """`agent.get_action_and_value` (the rollout's forward pass) and `functions`, compiled with `torch.compile` for
    each input shape (`dynamic=False`) when they are first called, with `--compile`; with
    `--cudagraphs` the policy is also replayed as CUDA graphs (`reduce-overhead`), which launch
    each of the rollout's tiny forward passes at once (the rollout copies the outputs before the
    next replay). Otherwise the functions as they are. A compiled function draws the same random
    numbers as the eager one, so a compiled run learns what the eager run learns, up to float
    rounding. The loss and GAE are not graphed: the update keeps their outputs across calls."""
    policy = agent.get_action_and_value
    if not (args.compile or args.cudagraphs):
        return (policy, *functions)
    import torch

    mode = "reduce-overhead" if args.cudagraphs else "default"
    policy = torch.compile(policy, mode=mode, dynamic=False)
    return (policy, *(torch.compile(f, dynamic=False) for f in functions))


def share_size(batch_size: int, minibatch_size: int, world_size: int) -> int:
    """The rows of every rank's share of a minibatch under --compile on `world_size` ranks. A
    minibatch draws `minibatch_size` of the `batch_size` transitions, the rank holding 1 /
    world_size of them: its share is hypergeometric. The fixed size is its mean plus
    `SHARE_SIGMAS` standard deviations, never more than the minibatch or the rank's batch: for
    256 of 1,024 on 2 ranks, 170 rows for the mean share of 128 (+33%); for 2,048 of 8,192 on 8
    ranks, 334 for 256 (+30%). Alone, the whole minibatch."""
    if world_size == 1:
        return minibatch_size
    mean = minibatch_size / world_size
    var = mean * (1 - 1 / world_size) * (batch_size - minibatch_size) / max(batch_size - 1, 1)
    bound = math.ceil(mean + SHARE_SIGMAS * math.sqrt(var))
    return min(minibatch_size, batch_size // world_size, bound)
