"""`--compile` and `--cudagraphs` of the torch scripts."""

from __future__ import annotations


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
