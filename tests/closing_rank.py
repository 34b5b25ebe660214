"""One rank of the closing test (tests/test_distributed.py), as a real process:
`python tests/closing_rank.py` with torchrun's variables set. It joins the group, builds an
optimizer (its first use imports torch._dynamo), gathers on rank 0 as a checkpoint does and closes
the group, printing its gloo threads once joined, once gathered and once closed: closing must free
the group and join them, or they outlive the interpreter and can abort the process at its exit.
(Which threads gloo has started by a given moment varies: `pt_gloo_runloop` may start only with
the first collective.) Rank 0 lingers a second before closing, as it does writing its last
checkpoint: no rank may leave before every rank is closing (the wait in `Distributed.close`).
"""

from __future__ import annotations

import os
import time

import torch
from update_rank import make_args

from cleanrl_utils.distributed.torch_ranks import Distributed


def gloo_threads() -> list[str]:
    """The names of this process's threads that gloo started (`pt_gloo_runloop`, ...)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                names.append(comm.read().strip())
        except (FileNotFoundError, ProcessLookupError):  # (a thread that ended since the listing:
            pass  # its file gone, or still there with no thread behind it)
    return sorted(name for name in names if "gloo" in name)


if __name__ == "__main__":
    dist = Distributed(make_args(local_num_envs=1))
    dist.connect()
    print(f"joined: {gloo_threads()}")
    torch.optim.Adam(torch.nn.Linear(2, 2).parameters()).zero_grad()
    dist.gather({"rng": torch.get_rng_state()})
    print(f"gathered: {gloo_threads()}")
    if dist.rank == 0:
        time.sleep(1.0)
    print(f"closing at: {time.time()}", flush=True)
    dist.close()
    print(f"left at: {time.time()}")
    print(f"closed: {gloo_threads()}")
