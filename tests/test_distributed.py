"""Data-parallel PPO (cleanrl_utils/distributed/torch_ranks.py and the *_multigpu scripts).

The key proof: 2 gloo ranks, real processes, each holding half the envs of a rollout, end a whole
update (every epoch and minibatch) with the parameters that the single-process sibling script
reaches on the whole rollout, to float tolerance: once with no gradient clipped and once with every
minibatch's gradient clipped (the ranks clip the sum of their gradients, not each its own). The
same processes then put a rank's permutation generator one draw out of step: the stop agreement
catches it. A third case pads each rank's share to the fixed size of `--compile`. In process: each rank's share of a minibatch (padded or not), a padded share's loss, what the ranks
compare at the start, the backend's default, the permutation generator and its older checkpoints,
the processes' messages (JSON: a pickle from another process is refused unread). JAX processes,
without a script: where the coordinator listens, and the one line of a coordinator or
peers that never come, or of a coordinator's port in use.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from ports import free_port
from scripts_testing import REPO_ROOT, finish_script, script_env, start_script
from update_rank import (
    CASES,
    NUM_ENVS,
    NUM_MINIBATCHES,
    NUM_STEPS,
    SHUFFLE_SEED,
    make_args,
    make_case,
)

from cleanrl_utils.distributed.agreement import Shuffle, adopt_old_shuffle, disagreement
from cleanrl_utils.distributed.torch_ranks import Distributed, default_backend
from cleanrl_utils.files.scripts import load_script
from cleanrl_utils.files.state_file import decode_tree, encode_tree
from cleanrl_utils.ppo.compile import share_size

# The module's fixtures start its runs once: its tests share one xdist worker.
pytestmark = pytest.mark.xdist_group(__name__)

SIBLINGS = {"ppo_atari_envpool_multigpu": "ppo_atari_envpool", "ppo_atari_multigpu": "ppo_atari"}


def rank_env(cwd, rank: int, world_size: int, port: int, **extra) -> dict:
    """torchrun's variables for `rank`; the test session's PYTHONPATH (tests/ is the rank
    script's own folder, first on its path), as for every script the suite starts through the
    preloaded interpreter (another one would need a new interpreter)."""
    return script_env(
        cwd,
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_WORLD_SIZE=str(world_size),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        **extra,
    )


def single_process_update(name: str, case: str, monkeypatch):
    """The sibling's update on the whole rollout; also the gradient norms it clipped and the
    network's parameters before the update."""
    max_grad_norm, lr = CASES[case]
    script = load_script(SIBLINGS[name])
    agent, optimizer, rollout, advantages, returns = make_case(SIBLINGS[name], lr=lr)
    initial = {key: value.clone() for key, value in agent.state_dict().items()}
    norms, clip = [], torch.nn.utils.clip_grad_norm_

    def recording_clip(*args, **kwargs):
        norm = clip(*args, **kwargs)
        norms.append(norm.item())
        return norm

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    np.random.seed(SHUFFLE_SEED)
    args = make_args(max_grad_norm=max_grad_norm)
    stats = script.update(script.ppo_loss, agent, optimizer, args, rollout, advantages, returns)
    monkeypatch.undo()
    return agent.state_dict(), {k: float(v.detach()) for k, v in stats.items()}, norms, initial


@pytest.fixture(scope="module")
def rank_results(tmp_path_factory):
    """What each rank of update_rank.py saved, for both scripts: 2 gloo ranks each, all at once,
    each a process of its own forked from the preloaded interpreter (tests/preload_testing.py)."""
    tmp_path, world_size = tmp_path_factory.mktemp("ranks"), 2
    procs = {}
    for name in SIBLINGS:
        port = free_port()
        procs[name] = [
            start_script(
                [name, str(tmp_path / f"{name}_{r}.pt")],
                tmp_path,
                script=REPO_ROOT / "tests" / "update_rank.py",
                env=rank_env(tmp_path, r, world_size, port),
            )
            for r in range(world_size)
        ]
    results = {}
    for name, ranks in procs.items():
        ended = [finish_script(p, timeout=180) for p in ranks]
        outputs = [done.stdout + done.stderr for done in ended]
        saved = [tmp_path / f"{name}_{r}.pt" for r in range(world_size)]
        assert all(path.exists() for path in saved), "\n".join(outputs)
        results[name] = [
            torch.load(path) | {"ended": (done.returncode, out)}
            for path, done, out in zip(saved, ended, outputs)
        ]
    return results


@pytest.mark.parametrize("name", list(SIBLINGS))
def test_two_ranks_update_as_one_process_on_the_whole_rollout(name, rank_results, monkeypatch):
    ranks = rank_results[name]
    for case, (max_grad_norm, lr) in CASES.items():
        expected = single_process_update(name, case, monkeypatch)
        expected_params, expected_stats, norms, initial = expected
        # the clipped cases clip every minibatch's gradient, the unclipped one none
        assert len(norms) == NUM_MINIBATCHES * make_args().update_epochs, case
        assert all((norm > max_grad_norm) == (case != "unclipped") for norm in norms), (case, norms)
        for got in (r[case] for r in ranks):
            assert got["params"].keys() == expected_params.keys()
            for key, value in expected_params.items():
                # float rounding differs (each rank sums its share first): relative to the step,
                step = (value - initial[key]).norm()
                assert step > 0, (case, key)
                # (float32 rounds w + step to the weights' precision: ~1e-3 of this small step; a
                # gradient off by a factor, weighted or clipped per rank is off by 10% or more)
                assert (got["params"][key] - value).norm() <= 1e-2 * step, (case, key)
            assert got["stats"] == pytest.approx(expected_stats, rel=1e-3, abs=1e-6), case
        # the ranks end with the same network, bit for bit (each applies the same summed gradient)
        for key in expected_params:
            assert torch.equal(ranks[0][case]["params"][key], ranks[1][case]["params"][key]), key


@pytest.mark.parametrize("name", list(SIBLINGS))
def test_a_rank_whose_permutation_generator_is_out_of_step_is_caught_in_the_stop_agreement(
    name, rank_results
):
    for rank in rank_results[name]:
        assert rank["in step"] is None  # no stop signal, the same generator: the run goes on
        code, said = rank["ended"]  # then rank 1 drew once more: both stop there
        last = said.strip().splitlines()[-1]
        assert code == 1 and "Traceback" not in said, said
        assert last.startswith("error: the ranks' minibatch permutations differ"), said
        assert "on rank 0" in last and "on rank 1" in last, said


def test_closing_frees_the_group_and_its_threads_after_an_optimizer_imported_dynamo(tmp_path):
    """torch._dynamo, imported after the group was made, kept it alive past `close`: its gloo
    threads outlived the interpreter, and a rank that exited while rank 0 still wrote its last
    checkpoint could abort ("terminate called without an active exception", SIGABRT)."""
    port = free_port()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(REPO_ROOT / "tests" / "closing_rank.py")],
            cwd=tmp_path,
            env=rank_env(tmp_path, r, 2, port),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    outs = []
    for rank in ranks:
        out = rank.communicate(timeout=180)[0]
        outs.append(out)
        assert rank.returncode == 0, out
        # gloo's threads were there to be joined (which ones, by when, varies)...
        assert re.search(r"^joined: (.*)$", out, re.M)[1] != "[]", out
        assert re.search(r"^gathered: (.*)$", out, re.M)[1] != "[]", out
        # ...and closing joined them all
        assert re.search(r"^closed: (.*)$", out, re.M)[1] == "[]", out
    # rank 1 left only once rank 0, a second behind it, was closing too: leaving at once, it
    # could reset the connection under rank 0's last gather
    (closing_0,), (left_1,) = (
        re.findall(rf"^{w} at: (.*)$", o, re.M) for w, o in zip(("closing", "left"), outs)
    )
    assert float(left_1) >= float(closing_0), outs


def rank_of(rank: int, world_size: int = 2) -> Distributed:
    dist = object.__new__(Distributed)
    dist.rank, dist.world_size, dist.device = rank, world_size, torch.device("cpu")
    return dist


@pytest.mark.parametrize("compiled", [False, True])
def test_the_ranks_minibatches_together_are_the_single_process_minibatch(compiled):
    """Eager: each rank's share as it comes. Compiled: every share padded to one fixed size,
    the padding not real; the real rows together are still the minibatch."""
    args = make_args(local_num_envs=NUM_ENVS // 2)
    args.compile = compiled
    batch = NUM_STEPS * NUM_ENVS
    b_inds = np.random.default_rng(0).permutation(batch)
    global_ids = np.arange(batch).reshape(NUM_STEPS, NUM_ENVS)
    sizes = set()
    for start in range(0, batch, batch // NUM_MINIBATCHES):
        mb = b_inds[start : start + batch // NUM_MINIBATCHES]
        union = []
        for rank in range(2):
            local, real, loss_fn = rank_of(rank).share(mb, args, len)
            assert loss_fn is len and real.shape == (len(local),)
            mine = global_ids[:, rank * 2 : (rank + 1) * 2].reshape(-1)  # its flattened rollout
            union += mine[local[real.bool().numpy()]].tolist()
            sizes.add(len(local))
            assert real.tolist() == sorted(real.tolist(), reverse=True)  # the padding last
        assert sorted(union) == sorted(mb.tolist())
    assert (sizes == {share_size(batch, batch // NUM_MINIBATCHES, 2)}) == compiled, sizes


def test_a_minibatch_with_a_share_larger_than_the_fixed_size_runs_eagerly_on_every_rank():
    batch, minibatch = 64, 32  # 16 a rank on average, fixed at 29
    args = make_args(local_num_envs=2)
    args.num_envs, args.batch_size, args.minibatch_size, args.compile = 4, batch, minibatch, True
    assert share_size(batch, minibatch, 2) == 29
    global_ids = np.arange(batch).reshape(16, 4)
    mb = np.concatenate([global_ids[:, :2].reshape(-1)[:30], global_ids[:, 2:].reshape(-1)[:2]])

    def loss(*args):  # (never called: what `share` picks is the point)
        return 0

    compiled = torch.compile(loss)
    for rank, count in ((0, 30), (1, 2)):
        local, real, loss_fn = rank_of(rank).share(mb, args, compiled)
        assert loss_fn is loss and len(local) == count and bool(real.all()), rank
    local, real, loss_fn = rank_of(1).share(mb[2:], args, compiled)  # 28 and 2: padded
    assert loss_fn is compiled and len(local) == 29 and real.sum() == 2


@pytest.mark.parametrize("name", list(SIBLINGS))
def test_a_padded_share_gives_the_loss_and_gradients_of_the_unpadded_one(name):
    script = load_script(name)
    agent, _, rollout, advantages, returns = make_case(SIBLINGS[name])
    rollout = dataclasses.replace(rollout, advantages=advantages, returns=returns)
    args, dist = make_args(), rank_of(0, world_size=1)
    inds = np.random.default_rng(1).permutation(NUM_STEPS * NUM_ENVS)[:10]
    padded = np.pad(inds, (0, 6))  # six more rows: transition 0, not real
    results = []
    for share, real in ((inds, torch.ones(10)), (padded, (torch.arange(16) < 10).float())):
        agent.zero_grad()
        loss, stats = script.ppo_loss(agent, args, rollout.minibatch(share), real, dist)
        loss.backward()
        results.append((loss, stats, [p.grad.clone() for p in agent.parameters()]))
    (loss, stats, grads), (p_loss, p_stats, p_grads) = results
    torch.testing.assert_close(p_loss, loss)
    for key in stats:
        torch.testing.assert_close(p_stats[key], stats[key])
    for grad, p_grad in zip(grads, p_grads):
        torch.testing.assert_close(p_grad, grad)


def test_the_ranks_disagreement_names_each_difference_with_the_ranks_holding_each_value():
    agree = {"the script": "s.py (sha256 ab)", "--learning-rate": 0.00025, "--seed": 1}
    assert disagreement([agree, dict(agree)]) is None
    views = [agree, agree | {"--learning-rate": 0.5}, agree, agree | {"--seed": 7}]
    line = disagreement(views)
    assert line.startswith(
        "the ranks disagree on --learning-rate: 0.00025 on ranks 0, 2, 3, 0.5 on rank 1; "
        "--seed: 1 on ranks 0, 1, 2, 7 on rank 3"
    ), line
    many = [agree | {f"--x{i}": 0 for i in range(5)}, agree | {f"--x{i}": 1 for i in range(5)}]
    assert "--x2: 0 on rank 0, 1 on rank 1; 2 more" in disagreement(many)


def test_nccl_is_the_default_on_cuda_devices_and_gloo_elsewhere_and_backend_overrides():
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    assert default_backend("auto", cuda) == "nccl" and default_backend("auto", cpu) == "gloo"
    assert default_backend("gloo", cuda) == "gloo" and default_backend("nccl", cpu) == "nccl"


def test_the_permutation_generator_draws_the_global_generators_permutations_and_checkpoints():
    np.random.seed(5)
    expected = [np.random.permutation(8) for _ in range(3)]
    shuffle, inds = Shuffle(5), np.arange(8)
    got = []
    for _ in range(3):
        inds = np.arange(8)
        shuffle(inds)
        got.append(inds)
    assert all((a == b).all() for a, b in zip(got, expected))
    saved = decode_tree(encode_tree(shuffle.state_dict()))
    again = Shuffle(0)
    again.load_state_dict(saved)
    assert again.digest() == shuffle.digest() != Shuffle(5).digest()
    a, b = np.arange(8), np.arange(8)
    shuffle(a), again(b)
    assert (a == b).all()


def test_a_checkpoint_of_before_the_permutation_generator_goes_on_with_its_permutations():
    """Such a checkpoint holds the global NumPy generator's state, which drew the permutations."""
    np.random.seed(9)
    np.random.permutation(16)  # the permutations drawn before the checkpoint
    payload = decode_tree(
        encode_tree({"state": {}, "ranks_rng": [{}, {"numpy": np.random.get_state()}]})
    )
    expected = np.random.permutation(16)  # what the run would have drawn next
    adopt_old_shuffle(payload, rank=1)
    shuffle = Shuffle(0)
    shuffle.load_state_dict(payload["state"]["shuffle"])
    inds = np.arange(16)
    shuffle(inds)
    assert (inds == expected).all()
    newer = {"state": {"shuffle": Shuffle(4).state_dict()}, "rng": {"numpy": np.random.get_state()}}
    adopt_old_shuffle(newer, rank=0)  # a checkpoint that has one keeps it
    assert (newer["state"]["shuffle"]["key"] == Shuffle(4).state_dict()["key"]).all()


@pytest.mark.parametrize("value", ["abc", "nan", "-5", "inf", "0", "1e300"])
def test_a_timeout_that_is_not_seconds_is_one_line_naming_the_variable(monkeypatch, value):
    """`CLEANRL_DIST_TIMEOUT_S` is read where a rank of a multi-process run starts, not at the
    import (it was a traceback there, and NaN, -5, inf went through): one `error:` line naming
    it, exit code 2. Unset or empty: the default; a one-process run never reads it."""
    from cleanrl_utils.console.errors import RunError
    from cleanrl_utils.distributed import lost_ranks
    from cleanrl_utils.distributed.jax_processes import JaxDistributed

    monkeypatch.setenv("CLEANRL_DIST_TIMEOUT_S", value)
    args = make_args(local_num_envs=1)
    assert Distributed(args).timeout_s == lost_ranks.DEFAULT_TIMEOUT_S  # (world size 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")  # (rank 0 without torchrun tells no one at its exit)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAX_PROCESS_ID", "0")
    for make in (Distributed, JaxDistributed):
        with pytest.raises(RunError) as raised:
            make(args)
        assert raised.value.code == 2 and "CLEANRL_DIST_TIMEOUT_S" in raised.value.line
        assert raised.value.line.startswith("error: ") and "\n" not in raised.value.line
    for fine, seconds in (("", 600.0), ("5", 5.0), (" 2.5 ", 2.5)):
        monkeypatch.setenv("CLEANRL_DIST_TIMEOUT_S", fine)
        assert lost_ranks.timeout_s() == seconds


class Payload:
    """Unpickling this creates the marker file: what a hostile message would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def process_0_of_2(kind: str, monkeypatch):
    """Process (rank) 0 of two, of `kind` (torch or JAX), its collective `transport(mine)` (the
    rows every process sends, as a list) to be given by the test."""
    import jax.experimental.multihost_utils as multihost

    from cleanrl_utils.distributed.jax_processes import JaxDistributed

    for name, value in (("WORLD_SIZE", "2"), ("RANK", "0"), ("JAX_NUM_PROCESSES", "2")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("JAX_PROCESS_ID", "0")
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1")
    if kind == "jax":
        dist = JaxDistributed(make_args())
    else:
        dist = Distributed(make_args(local_num_envs=1))

    def connect(transport):
        monkeypatch.setattr(multihost, "process_allgather", lambda x: np.stack(transport(x)))
        parts = lambda t: [torch.from_numpy(p) for p in transport(t.numpy())]  # noqa: E731
        monkeypatch.setattr(dist, "cat", lambda t, dim: torch.cat(parts(t), dim), raising=False)

    return dist, connect


@pytest.mark.parametrize("kind", ["torch", "jax"])
def test_a_message_that_is_a_pickle_is_refused_unread_with_one_line_naming_its_sender(
    kind, tmp_path, monkeypatch, capsys
):
    """The processes' exchanges (the start's agreement, the checkpoint's RNG states, the games)
    carry plain data as JSON: a message from process 1 that is a pickle whose payload would
    create a file is one line naming process 1, on every process, exit code 1, and the file
    never appears (the processes unpickled each other's messages: anything that reached the
    port could run code in them)."""
    marker = tmp_path / "payload-ran"
    hostile = np.frombuffer(pickle.dumps({"x": Payload(marker)}), np.uint8)

    def hostile_transport(mine: np.ndarray) -> list:
        if mine.dtype == np.int64:  # (the sizes first)
            return [mine, np.full_like(mine, len(hostile))]
        theirs = np.zeros_like(mine)
        theirs.reshape(-1)[: len(hostile)] = hostile
        return [mine, theirs]

    def exit_(code):
        raise SystemExit(code)

    dist, connect = process_0_of_2(kind, monkeypatch)
    connect(hostile_transport)
    monkeypatch.setattr(os, "_exit", exit_)
    capsys.readouterr()
    with pytest.raises(SystemExit) as raised:
        dist.gather([(1, 2.0, 3)])
    assert not marker.exists()
    said = capsys.readouterr().err.strip().splitlines()
    assert raised.value.code == 1 and len(said) == 1, said
    noun = "rank" if kind == "torch" else "process"
    assert said[0].startswith(f"error: {noun} 1 sent a message that is not JSON"), said
    assert "nothing in it is run" in said[0]
    # what the processes do send goes through whole: tuples, numbers, NumPy arrays
    connect(lambda mine: [mine, mine])
    state = np.random.get_state()
    got = dist.gather({"games": [(1, 2.0, 3)], "numpy": state})
    assert got[1]["games"] == [(1, 2.0, 3)] and (got[1]["numpy"][1] == state[1]).all()


def listening_hosts(port: int) -> list[str]:
    """The local addresses of the TCP sockets listening on `port` (Linux's /proc/net)."""
    import ipaddress

    hosts = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(table).read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            host, _, port_hex = local.partition(":")
            if state == "0A" and int(port_hex, 16) == port:  # (0A: LISTEN)
                raw = bytes.fromhex(host)
                # (the kernel writes each 32-bit word in host order: little-endian here)
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                address = ipaddress.ip_address(raw)
                # (gRPC listens on an IPv6 socket for an IPv4 address too, mapped)
                hosts.append(str(getattr(address, "ipv4_mapped", None) or address))
    return hosts


JAX_PROCESS = """
import types
import cleanrl_utils.entry
from cleanrl_utils.console.errors import entry_point
from cleanrl_utils.distributed.jax_processes import JaxDistributed
with entry_point():
    JaxDistributed(types.SimpleNamespace(num_envs=4)).connect()
"""


def start_jax_process(tmp_path, address: str, process_id: int, timeout_s: float = 30):
    """One process of two of `jax.distributed` (no script: what `connect` does alone)."""
    env = script_env(
        tmp_path,
        JAX_PLATFORMS="cpu",
        JAX_COORDINATOR_ADDRESS=address,
        JAX_NUM_PROCESSES="2",
        JAX_PROCESS_ID=str(process_id),
        CLEANRL_DIST_TIMEOUT_S=str(timeout_s),
        PYTHONPATH=str(REPO_ROOT),
    )
    return subprocess.Popen(
        [sys.executable, "-c", JAX_PROCESS],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_jax_coordinator_listens_on_the_host_it_is_given_alone(tmp_path):
    """Process 0 given `127.0.0.1:PORT` listens there, not on every interface (JAX's default:
    a loopback run was open to the network)."""
    port = free_port()
    proc = start_jax_process(tmp_path, f"127.0.0.1:{port}", 0)
    try:
        deadline = time.time() + 60
        while not (hosts := listening_hosts(port)) and proc.poll() is None:
            assert time.time() < deadline, "process 0 never listened"
            time.sleep(0.1)
        assert hosts == ["127.0.0.1"], (hosts, proc.poll())
    finally:
        proc.kill()
        proc.communicate()


def test_a_jax_process_whose_coordinator_never_comes_is_one_line_and_exit_2_in_time(tmp_path):
    """Process 1 with nothing at the coordinator's address, process 1 whose coordinator's port
    a program holds that is not JAX (it takes connections, says nothing), process 0 whose
    process 1 never comes: each waits `CLEANRL_DIST_TIMEOUT_S`, then one `error:` line saying
    how far it got, exit code 2 (jaxlib's own timeout is a LOG(FATAL): SIGABRT, a C++ stack,
    exit 134)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        holder = f"127.0.0.1:{held.getsockname()[1]}"
        cases = {
            "nothing answered at": (f"127.0.0.1:{free_port()}", 1),
            "something listens at": (holder, 1),
            "the other 1 did not all join": (f"127.0.0.1:{free_port()}", 0),
        }
        started = time.time()
        procs = {
            said: start_jax_process(tmp_path, address, process_id, timeout_s=1)
            for said, (address, process_id) in cases.items()
        }
        ended = {said: proc.communicate(timeout=60) for said, proc in procs.items()}
    assert time.time() - started < 30
    for said, (out, err) in ended.items():
        lines = err.strip().splitlines()
        assert procs[said].returncode == 2 and len(lines) == 1, (said, out, err)
        process_id = cases[said][1]
        assert lines[0].startswith(f"error: process {process_id}: {said}"), lines
        assert "within 1 s (CLEANRL_DIST_TIMEOUT_S)" in lines[0], lines


def test_a_jax_coordinators_port_in_use_is_one_line_at_once(tmp_path):
    """Process 0 whose port another program holds: one line saying so, at once, exit code 2
    (it followed jaxlib's C++ log line and said "within 600 s" of a failure at once)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        address = f"127.0.0.1:{held.getsockname()[1]}"
        proc = start_jax_process(tmp_path, address, 0, timeout_s=600)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err.strip().splitlines() == [
        f"error: process 0: the port of {address} is in use by another program: give "
        "JAX_COORDINATOR_ADDRESS another port (the same on every process)"
    ], (out, err)
