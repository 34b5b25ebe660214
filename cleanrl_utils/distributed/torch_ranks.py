"""One run on many processes: `torch.distributed` set up from torchrun's variables, and the few
collectives a data-parallel script makes.

A script of `cleanrl/` that runs on many processes (launched by `torchrun`, one process per rank)
makes these calls, next to the run lifecycle's (`cleanrl_utils.run`):

    with entry_point(), Run(parse_args(Args), __file__, dist=Distributed) as run:
        dist = run.dist           # RANK, WORLD_SIZE...; bad --backend/--device-ids: one `error:`
                                  # line on every rank and exit 2, before connecting
        dist.connect(run)         # the process group (NCCL on GPUs, else gloo), a bounded wait;
                                  # the ranks agree on the arguments, script and run folder
        ...
        loss.backward()
        dist.sum_gradients(agent) # every minibatch: the ranks' gradients summed
        ...
        games = dist.gather(finished)  # every rank's finished games, to rank 0 (None elsewhere)
        dist.shuffle(b_inds)      # the minibatch permutation: its own generator, alike everywhere

Run alone (no torchrun), the script is a one-process run: world size 1, no process group, and
every call does what one process needs (nothing, or returns its input).

The update is the single-process update of the global batch. Every rank draws the same
permutation of the global batch from a generator of its own (`Shuffle`: seeded alike, part of the
checkpoint, its digest compared in the stop agreement every iteration) and takes from each
minibatch the transitions it holds (`share`), so that the ranks' minibatches together are
the single-process minibatch. Means over a minibatch are sums over each rank's share divided by
the minibatch's global count (`sum`; the advantages' statistics: `moments`), so that summing the
ranks' gradients gives the gradient of the union minibatch's loss.

At the start the ranks compare what must be equal (the arguments that shape the run, the
script's code, the resume target, the runs folder) in one collective: a difference is one
`error:` line naming it, on every rank, and exit code 2, before any env is built (`agree`,
`cleanrl_utils.distributed.agreement`). A rank that stops before joining (bad input on it alone) says so in the
store the ranks meet at, and the others stop at once (`cleanrl_utils.distributed.lost_ranks`).

A rank that dies (its process killed, its node gone) fails the next collective of the others;
they exit with one line naming the lost rank (exit code 1, `FAILED`) instead of waiting;
the lowest rank left records the stop in config.json (rank 0, unless it is the one lost), and
the line names the resume command only when the run has a checkpoint. Every wait is bounded by
`timeout_s` (the variable `CLEANRL_DIST_TIMEOUT_S`, default 600 s; `lost_ranks.timeout_s`).
"""

from __future__ import annotations

import atexit
import datetime
import errno
import os
import signal
import socket
import threading

import numpy as np

from cleanrl_utils.console.errors import FAILED, USAGE_ERROR, fail
from cleanrl_utils.console.output import flush, say
from cleanrl_utils.distributed import lost_ranks
from cleanrl_utils.distributed.agreement import (
    BadMessage,
    Shuffle,
    adopt_old_shuffle,
    decode_messages,
    disagreement,
    encode_message,
    run_view,
)
from cleanrl_utils.distributed.lost_ranks import late, say_and_exit, watch_joining
from cleanrl_utils.ppo.compile import share_size


def default_backend(backend: str, device) -> str:
    """The process group's backend: `--backend` when given, else NCCL on CUDA devices (GPU to
    GPU, no copy through the host) and gloo on CPUs."""
    if backend != "auto":
        return backend
    return "nccl" if device.type == "cuda" else "gloo"


def port_in_use(addr: str, port: str) -> bool:
    """Whether another process listens on `port` of this host (rank 0 would host the store)."""
    with socket.socket() as probe:
        try:
            probe.bind(("" if addr in ("localhost", "127.0.0.1") else addr, int(port)))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        except ValueError:
            return False
    return False


class Distributed:
    """This process's place in the run (rank, world size, device) and the collectives."""

    def __init__(self, args):
        """Reads torchrun's variables and chooses the device (`--device-ids`, `--cuda`); a
        `--backend` or `--device-ids` that cannot work is one `error:` line and exit code 2, on
        every rank alike (each checks the same thing), before any connection."""
        import torch

        env = os.environ
        self.world_size = int(env.get("WORLD_SIZE", 1))
        self.rank = int(env.get("RANK", 0))
        self.local_rank = int(env.get("LOCAL_RANK", 0))
        local_world_size = int(env.get("LOCAL_WORLD_SIZE", self.world_size))
        self.is_main = self.rank == 0
        self.group = None
        self.run = None  # the run these ranks train (`connect`): a lost rank's stop is recorded
        self.shuffler = Shuffle(getattr(args, "seed", 0))  # (a resumed run: as checkpointed)
        if args.local_num_envs <= 0:
            fail(f"--local-num-envs must be positive, got {args.local_num_envs}")
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if args.backend == "nccl" and gpus == 0:
            fail("--backend nccl needs CUDA GPUs and torch sees none here: use --backend gloo")
        if args.device_ids and local_world_size > len(args.device_ids):
            fail(
                f"{local_world_size} processes on this node but --device-ids names "
                f"{len(args.device_ids)} device(s) ({' '.join(map(str, args.device_ids))}): "
                "one device per process"
            )
        if args.device_ids and gpus and max(args.device_ids) >= gpus:
            fail(f"--device-ids {max(args.device_ids)}: torch sees {gpus} GPU(s) on this node")
        if args.backend == "nccl" or (args.cuda and gpus):
            ids = args.device_ids or list(range(gpus))
            self.device = torch.device("cuda", ids[self.local_rank % len(ids)])
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        self.backend = default_backend(args.backend, self.device)
        self.joined = False
        self.timeout_s = lost_ranks.DEFAULT_TIMEOUT_S
        if self.world_size > 1:  # (registered after the checks every rank makes alike)
            atexit.register(lost_ranks.tell_stopped_before_joining, self)
            # (after the registration: the variable is this node's, and a rank that refuses it
            # tells the others)
            self.timeout_s = lost_ranks.timeout_s()

    def connect(self, run=None) -> None:
        """Joins the process group (a one-process run has none). A port in use or a rank 0
        that does not answer within `timeout_s` is one `error:` line and exit code 2. With
        `run` (a `cleanrl_utils.run.Run`), the ranks then agree on it (`agree`)."""
        self.run = run
        if run is not None and run.payload is not None:  # (a checkpoint of before `Shuffle`)
            adopt_old_shuffle(run.payload, self.rank)
        if self.world_size == 1:
            return
        # torch._dynamo first imported after the group is made (by an optimizer) keeps it alive
        # past destroy_process_group: its gloo threads outlive the interpreter and can abort the
        # exit ("terminate called without an active exception"; tests/test_distributed.py)
        import torch._dynamo  # noqa: F401
        import torch.distributed as torch_dist

        addr, port = os.environ.get("MASTER_ADDR", "?"), os.environ.get("MASTER_PORT", "?")
        where = f"{addr}:{port}"
        hosts_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"  # not torchrun's
        if self.rank == 0 and hosts_store and port_in_use(addr, port):
            fail(f"rank 0: port {where} is in use: give another MASTER_PORT (or --master-port)")
        # whatever the process group waits on (a store that never answers, a rank that stopped
        # before joining), it waits no longer
        watchdog = threading.Timer(
            self.timeout_s,
            say_and_exit,
            args=(self.rank, late(self.world_size, where, self.timeout_s)),
        )
        watchdog.daemon = True
        watchdog.start()
        joining = threading.Event()
        threading.Thread(target=watch_joining, args=(self.rank, joining), daemon=True).start()
        timeout = datetime.timedelta(seconds=self.timeout_s)
        try:
            torch_dist.init_process_group(
                self.backend, rank=self.rank, world_size=self.world_size, timeout=timeout
            )
        except (RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            fail(f"rank {self.rank}: could not join the other ranks at {where} ({first})")
        finally:
            joining.set()
            watchdog.cancel()
        self.joined = True
        self.group = torch_dist.group.WORLD
        # the group's own store: the one private torch call (no public getter); the lost-rank
        # tests (tests/test_multigpu.py) fail if torch renames it
        self.store = torch_dist.distributed_c10d._get_default_store()
        if run is not None:
            self.agree(run)

    def agree(self, run) -> None:
        """The ranks compare `run_view` of their run in one collective: a difference is one
        `error:` line naming it on every rank and exit code 2. A new run's folder is named by
        rank 0's clock (each rank's name holds its own start time)."""
        views = self._exchange((run_view(run), run.name))
        problem = disagreement([view for view, _ in views])
        if problem:
            self._fail_together(problem, USAGE_ERROR)
        if run.payload is None:
            run.take_name(views[0][1])

    def _fail_together(self, message: str, code: int) -> None:
        """Every rank found the same problem in the same collective: one `error:` line each, and
        `code`. The process group is left as it is (a clean exit could abort on a peer that
        already left); rank 0 first flushes what TensorBoard holds."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (torchrun's, once another rank ended)
        if (writer := getattr(self.run, "writer", None)) is not None:
            writer.flush()
        flush()
        say(f"error: {message}")
        os._exit(code)

    def close(self, wait: bool = True) -> None:
        """Leaves the group; with `wait` (a rank in step with the others), only once every rank
        is closing (in the store, up to `timeout_s`): one that left at once could reset the
        connection under rank 0's last gather. A rank out of step leaves at once."""
        if self.group is None:
            return
        import torch.distributed as torch_dist

        lost_ranks.wait_closing(self, wait)
        torch_dist.destroy_process_group()
        self.group = None

    # -- the collectives --------------------------------------------------------------------

    def _collective(self, op, *args, **kwargs):
        """`op(*args)`, or one line naming the lost rank(s) and exit code 1 (`FAILED`) when
        a rank is gone."""
        try:
            return op(*args, **kwargs)
        except RuntimeError as exc:
            lost_ranks.exit_lost(self, exc)

    def sum(self, tensor):
        """`tensor` summed over the ranks (a new tensor on every rank)."""
        if self.world_size == 1:
            return tensor
        import torch.distributed as torch_dist

        tensor = tensor.detach().clone()
        self._collective(torch_dist.all_reduce, tensor)
        return tensor

    def moments(self, x, mask=None):
        """The count, mean and variance (n - 1 in the denominator; 0 for one value) of `x` over
        every rank's values where `mask` is 1, in one collective: each rank's count, mean and sum
        of squared deviations (alone: one process's statistics, exactly), combined as Chan et al."""
        import torch

        n = x.new_tensor(x.numel()) if mask is None else mask.sum()
        mean = (x if mask is None else x * mask).sum() / n.clamp(min=1.0)
        deviations = (x - mean) ** 2
        m2 = (deviations if mask is None else deviations * mask).sum()
        if self.world_size > 1:
            counts, means, m2s = self.cat(torch.stack([n, mean, m2])[None], dim=0).unbind(1)
            n = counts.sum()
            mean = (counts * means).sum() / n.clamp(min=1.0)
            m2 = (m2s + counts * (means - mean) ** 2).sum()
        return n, mean, m2 / (n - 1).clamp(min=1.0)

    def sum_values(self, values: dict) -> dict:
        """A dict of scalar tensors, each summed over the ranks (one collective)."""
        if self.world_size == 1:
            return values
        import torch

        summed = self.sum(torch.stack([v.detach().float() for v in values.values()]))
        return dict(zip(values, summed.unbind()))

    def sum_gradients(self, module) -> None:
        """The gradients of `module`'s parameters, summed over the ranks in place (one
        collective): each rank's loss is its share of the minibatch's mean, so the sum is the
        gradient of the whole minibatch's loss."""
        if self.world_size == 1:
            return
        import torch
        import torch.distributed as torch_dist

        grads = [p.grad for p in module.parameters() if p.grad is not None]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        self._collective(torch_dist.all_reduce, flat)
        for grad, summed in zip(grads, flat.split([grad.numel() for grad in grads])):
            grad.copy_(summed.view_as(grad))

    def broadcast_parameters(self, module) -> None:
        """Rank 0's parameters and buffers on every rank (the network starts the same)."""
        if self.world_size == 1:
            return
        import torch.distributed as torch_dist

        for tensor in [*module.parameters(), *module.buffers()]:
            self._collective(torch_dist.broadcast, tensor.data, src=0)

    def cat(self, tensor, dim: int):
        """Every rank's `tensor` (all of one shape) concatenated along `dim`, in rank order."""
        if self.world_size == 1:
            return tensor
        import torch
        import torch.distributed as torch_dist

        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        self._collective(torch_dist.all_gather, parts, tensor.contiguous())
        return torch.cat(parts, dim=dim)

    def gather(self, value) -> list | None:
        """Every rank's `value` (plain data: `ranks.encode_message`), in rank order, on rank 0;
        None elsewhere."""
        if self.world_size == 1:
            return [value]
        values = self._exchange(value)
        return values if self.is_main else None

    def _exchange(self, value) -> list:
        """Every rank's `value`, in rank order, on every rank (every rank reads every message,
        so that a message that is not one stops all ranks alike: one line naming its sender,
        exit code 1, and never run). torch's `*_object` collectives would unpickle them."""
        import torch

        data = torch.frombuffer(bytearray(encode_message(value)), dtype=torch.uint8)
        size = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        sizes = self.cat(size, dim=0).tolist()
        padded = torch.zeros(max(sizes), dtype=torch.uint8, device=self.device)
        padded[: len(data)] = data.to(self.device)
        rows = self.cat(padded[None], dim=0).cpu().numpy()
        try:
            return decode_messages(rows, sizes, "rank")
        except BadMessage as exc:
            self._fail_together(str(exc), FAILED)

    def agreed_stop(self, signum: int | None) -> int | None:
        """The stop agreement, once an iteration on every rank: None when no rank got a stop
        signal, else the signal of the lowest rank that got one, the same on every rank, so
        that all stop after the same iteration. The same collective compares the digests of the
        ranks' permutation generators: ranks that drew different minibatches (a rank that
        shuffled once more) stop with one `error:` line and exit code 1."""
        if self.world_size == 1:
            return signum
        import torch

        mine = [0 if signum is None else int(signum), self.shuffler.digest()]
        got = torch.tensor([mine], dtype=torch.int64, device=self.device)
        signals, digests = self.cat(got, dim=0).T.tolist()
        if len(set(digests)) > 1:
            said = ", ".join(f"{d:08x} on rank {r}" for r, d in enumerate(digests))
            self._fail_together(
                f"the ranks' minibatch permutations differ ({said}): their updates no longer "
                "add up to one; a rank drew from the permutation generator out of step",
                FAILED,
            )
        return next((s for s in signals if s), None)

    # -- the batch --------------------------------------------------------------------------

    def shuffle(self, inds: np.ndarray) -> None:
        """Shuffles `inds` in place with the ranks' permutation generator (`Shuffle`)."""
        self.shuffler(inds)

    def share(self, global_inds: np.ndarray, args, loss_fn):
        """This rank's share of a minibatch of the global batch: its indices into this rank's
        flattened rollout, `real` (1. for them, 0. for padding) and the loss to call. The global
        rollout is (num_steps, num_envs), rank r holding envs [r * n, (r + 1) * n); flattened,
        transition (t, e) is t * num_envs + e. With --compile on several ranks the share is padded
        (with row 0, not real) to a fixed size, `share_size`, so that the loss compiles once; a
        minibatch with a larger share on some rank (every rank sees it: one permutation) runs the
        eager loss (`__wrapped__`), on every rank."""
        import torch

        inds = global_inds
        if self.world_size > 1:
            n = args.num_envs // self.world_size
            t, e = np.divmod(global_inds, args.num_envs)
            inds = t[e // n == self.rank] * n + e[e // n == self.rank] % n
        real_count = len(inds)
        if self.world_size > 1 and (args.compile or args.cudagraphs):
            size = share_size(args.batch_size, args.minibatch_size, self.world_size)
            if np.bincount(e // n, minlength=self.world_size).max() <= size:
                inds = np.pad(inds, (0, size - real_count))
            else:
                loss_fn = getattr(loss_fn, "__wrapped__", loss_fn)
        real = (torch.arange(len(inds), device=self.device) < real_count).float()
        return inds, real, loss_fn
