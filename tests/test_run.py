"""`cleanrl_utils.run.Run`, the run's lifecycle, in-process with real objects: a checkpoint gives
back every object and RNG exactly (training continues bit for bit), `--resume` reconciles the
arguments and refuses what it cannot use, stop signals end the run with a checkpoint, laps and
progress are logged. The same behaviours with whole script processes are in test_resume.py."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
import threading
import time
from collections import deque
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
import tyro
from logs_testing import read_scalars
from run_testing import SCRIPT, SMALL, derive_sizes, open_run
from scripts_testing import REPO_ROOT

import cleanrl.ppo_atari_envpool as torch_script
from cleanrl_utils.after_training import finish_training
from cleanrl_utils.console.errors import CHECKPOINT_EXIT, INTERRUPTED, RunError, entry_point
from cleanrl_utils.files.state_file import (
    list_checkpoints,
    read_checkpoint,
    write_checkpoint,
)
from cleanrl_utils.files.sweeps import (
    LAUNCHER_VARIABLE,
    SWEEP_VARIABLE,
    launcher_env,
    launcher_gone,
)
from cleanrl_utils.run import KEEP, STOP_SIGNALS, Run
from cleanrl_utils.run.folder_guard import lock_run_folder, release_run_folder
from cleanrl_utils.run.resume import games_seed, given_flags, wait_for_folder


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """`Run.start` installs the stop signals' handlers: the test process gets its own back."""
    saved = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def torch_objects(seed: int):
    torch.manual_seed(seed)
    agent = torch_script.Agent(SimpleNamespace(single_action_space=gym.spaces.Discrete(4)))
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    return agent, optimizer


def train_step(agent, optimizer):
    """One gradient step whose data comes from the global torch and numpy RNGs."""
    obs = torch.randint(0, 256, (6, 4, 84, 84), dtype=torch.uint8)
    keep = torch.from_numpy(np.random.permutation(6)[:4])
    _, logprob, entropy, value = agent.get_action_and_value(obs[keep])
    loss = (value.squeeze(-1) - logprob).pow(2).mean() - 0.01 * entropy.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def rng_fingerprint():
    return (random.random(), np.random.random(), torch.rand(1).item())


def test_a_checkpoint_gives_back_every_object_and_rng_and_training_continues_bit_for_bit(
    tmp_path,
):
    run = open_run(tmp_path, checkpoint_every=1)
    agent, optimizer = torch_objects(seed=1)
    avg_returns = deque([1.0, 2.0], maxlen=20)
    state = {"agent": agent, "optimizer": optimizer, "avg_returns": avg_returns}
    run.restore(state)  # a new run: nothing to restore
    for _ in range(3):
        train_step(agent, optimizer)
    run.end_iteration(1, 8, avg_returns, state)  # due: writes checkpoint 1
    run.finish()
    # the straight run goes on
    train_step(agent, optimizer)
    straight = {k: v.clone() for k, v in agent.state_dict().items()}
    straight_rng = rng_fingerprint()

    # a new process: other RNG states, other initial weights, an empty optimizer
    random.seed(99), np.random.seed(99)
    resumed = open_run(tmp_path, resume=str(run.dir))
    agent2, optimizer2 = torch_objects(seed=99)
    avg2 = deque(maxlen=20)
    resumed.restore({"agent": agent2, "optimizer": optimizer2, "avg_returns": avg2})
    assert list(avg2) == [1.0, 2.0]
    assert (resumed.start_iteration, resumed.global_step) == (2, 8)
    train_step(agent2, optimizer2)
    for name, tensor in agent2.state_dict().items():
        assert torch.equal(tensor, straight[name]), name
    assert rng_fingerprint() == straight_rng
    resumed.finish()


def test_jax_state_restores_into_its_templates(tmp_path):
    jax = pytest.importorskip("jax")
    import optax
    from flax.training.train_state import TrainState

    import cleanrl.ppo_atari_envpool_xla_jax as jax_script

    def new_state(seed):
        # the script's AgentParams (flax asks `key in grads` of it), small enough to skip the CNN
        w = jax.random.normal(jax.random.PRNGKey(seed), (3, 2))
        params = jax_script.AgentParams({"w": w}, {"w": w[0]}, {"b": w[1, 0]})
        return TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-3))

    def step(agent_state, key):
        """An Adam step whose gradient depends on the parameters and the key."""
        key, noise_key = jax.random.split(key)
        noise = jax.random.uniform(noise_key)
        grads = jax.tree_util.tree_map(lambda p: jax.numpy.sin(p) + noise, agent_state.params)
        return agent_state.apply_gradients(grads=grads), key

    run = open_run(tmp_path, checkpoint_every=1)
    agent_state, key = new_state(0), jax.random.PRNGKey(5)
    state = {"agent_state": agent_state, "key": key}
    run.restore(state)
    agent_state, key = step(agent_state, key)  # new values: the dict still holds the first ones
    state.update(agent_state=agent_state, key=key)  # as the JAX scripts do before end_iteration
    run.end_iteration(1, 8, [], state)
    run.finish()
    straight, straight_key = step(agent_state, key)

    resumed = open_run(tmp_path, resume=str(run.dir))
    state = {"agent_state": new_state(1), "key": jax.random.PRNGKey(0)}
    assert resumed.restore(state) is None  # the values replaced in the dict, read back from it
    assert np.array_equal(state["key"], key)
    assert int(state["agent_state"].step) == 1
    again, again_key = step(state["agent_state"], state["key"])
    assert np.array_equal(straight_key, again_key)
    for a, b in zip(jax.tree_util.tree_leaves(straight), jax.tree_util.tree_leaves(again)):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    resumed.finish()


def test_resume_takes_the_checkpoints_arguments_for_the_flags_left_at_their_defaults(
    tmp_path, capsys
):
    run = open_run(tmp_path, checkpoint_every=1, learning_rate=1e-3, seed=7)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    run.finish()
    # flags not given take the checkpoint's values; free flags may change
    args = torch_script.Args(resume=str(run.dir), save_model=True)
    resumed = Run(args, SCRIPT, runs_dir=str(tmp_path))
    taken = resumed.args
    assert (taken.learning_rate, taken.seed, taken.num_envs, taken.save_model) == (1e-3, 7, 2, True)
    assert (args.learning_rate, args.seed) == (2.5e-4, 1)  # the caller's are not changed
    assert resumed.name == run.name and resumed.dir == run.dir.resolve()
    assert resumed.games_seed == games_seed(7, 2) != 7
    assert "resuming" in capsys.readouterr().out


def test_a_flag_given_at_its_default_is_kept_on_resume_not_taken_from_the_checkpoint(
    tmp_path, capsys, monkeypatch
):
    run = stopped_run(tmp_path, learning_rate=1e-3)
    argv = ["--resume", str(run.dir), "--learning-rate", "2.5e-4"]  # 2.5e-4: the default
    monkeypatch.setattr(sys, "argv", [SCRIPT, *argv])  # what Run reads when given no argv
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info, entry_point():
        Run(tyro.cli(torch_script.Args, args=argv), SCRIPT, runs_dir=str(tmp_path))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --resume: the checkpoint was made with --learning-rate 0.001, this command gives "
        "0.00025 (drop --learning-rate or start a new run)"
    ]
    # not given, it comes from the checkpoint; given as saved, it is agreed
    for argv in (["--resume", str(run.dir)], ["--resume", str(run.dir), "--learning_rate=1e-3"]):
        args = tyro.cli(torch_script.Args, args=argv)
        assert Run(args, SCRIPT, runs_dir=str(tmp_path), argv=argv).args.learning_rate == 1e-3


@pytest.mark.parametrize(
    "argv, given",
    [
        (["--learning-rate", "2.5e-4", "--seed=1"], {"learning_rate", "seed"}),
        (["--learning_rate", "2.5e-4", "--num_envs=8"], {"learning_rate", "num_envs"}),
        (
            ["--anneal-lr", "--no-norm-adv", "--no_clip_vloss"],
            {"anneal_lr", "norm_adv", "clip_vloss"},
        ),
        (["--exp-name", "x", "--target-kl", "None"], {"exp_name", "target_kl"}),
        (["--wandb-entity=--seed", "--resume", "auto"], {"wandb_entity", "resume"}),
        ([], set()),
    ],
)
def test_the_flags_given_are_read_from_the_command_line_as_tyro_reads_it(argv, given):
    args = tyro.cli(torch_script.Args, args=argv)  # a form tyro accepts, or this raises
    assert given_flags(args, argv) == given
    assert given_flags(args, ["--batch-size", "8", "--no-such-flag"]) == set()  # not flags


@pytest.mark.parametrize(
    "case, message",
    [
        ("contradicting", "the checkpoint was made with --num-envs 2, this command gives 4"),
        ("other_script", "was written by ppo_atari_envpool.py, not ppo_atari.py"),
        ("no_checkpoint", "no checkpoint (checkpoint_*.ckpt) in that folder"),
        ("all_corrupt", "no readable checkpoint"),
        ("missing", "no such run folder or checkpoint file"),
        ("other_state", "the checkpoint has no 'optimizer'"),
    ],
)
def test_a_resume_it_cannot_use_is_one_error_line_and_exit_code_2(tmp_path, capsys, case, message):
    run = open_run(tmp_path, checkpoint_every=1)
    run.restore({})
    run.end_iteration(1, 8, [], {"agent": {}})
    run.finish()
    target, flags, script = str(run.dir), {}, SCRIPT
    if case == "contradicting":
        flags = {"num_envs": 4}
    elif case == "other_script":
        script = str(REPO_ROOT / "cleanrl" / "ppo_atari.py")
    elif case == "no_checkpoint":
        for path in list_checkpoints(run.dir):
            path.unlink()
    elif case == "all_corrupt":
        for path in list_checkpoints(run.dir):
            path.write_bytes(b"garbage")
    elif case == "missing":
        target = str(tmp_path / "nothing_here")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info, entry_point():
        resumed = Run(torch_script.Args(resume=target, **flags), script, runs_dir=str(tmp_path))
        derive_sizes(resumed.args)
        resumed.start()
        resumed.restore({"agent": {}, "optimizer": {}})
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], errors


def test_a_corrupt_newest_checkpoint_falls_back_to_the_one_before(tmp_path, capsys):
    run = open_run(tmp_path, checkpoint_every=1)
    run.restore({})
    for iteration in (1, 2):
        run.end_iteration(iteration, 8 * iteration, [], {"x": iteration})
    run.finish()
    newest = run.dir / "checkpoint_0000002.ckpt"
    newest.write_bytes(newest.read_bytes()[:100])
    resumed = open_run(tmp_path, resume=str(run.dir))
    state = {"x": 0}
    resumed.restore(state)
    assert state == {"x": 1}
    assert f"warning: checkpoint {newest} is corrupt: checksum mismatch" in capsys.readouterr().err
    resumed.finish()


def test_resume_auto_takes_the_newest_run_with_a_checkpoint_or_starts_a_new_one(tmp_path, capsys):
    args = torch_script.Args(resume="auto", **SMALL)
    fresh = Run(args, SCRIPT, runs_dir=str(tmp_path))
    assert fresh.start_iteration == 1 and fresh.games_seed == args.seed
    assert "no unfinished run of ppo_atari_envpool" in capsys.readouterr().err
    older = open_run(tmp_path, checkpoint_every=1)
    older.restore({})
    older.end_iteration(1, 8, [], {})
    older.finish()
    newer_dir = tmp_path / f"Breakout-v5__ppo_atari_envpool__1__{int(time.time()) + 10}"
    newer_dir.mkdir()  # a newer run without a checkpoint (killed at once) is skipped
    resumed = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert resumed.name == older.name and resumed.start_iteration == 2


def test_a_finished_run_says_so_and_exits_0(tmp_path, capsys):
    run = open_run(tmp_path)
    run.restore({})
    for iteration in range(1, 6):  # 40 steps of 8: the last iteration writes a checkpoint
        run.end_iteration(iteration, 8 * iteration, [], {})
    run.finish()
    assert [p.name for p in list_checkpoints(run.dir)] == ["checkpoint_0000005.ckpt"]
    with pytest.raises(SystemExit) as exit_info, entry_point():
        Run(torch_script.Args(resume=str(run.dir)), SCRIPT, runs_dir=str(tmp_path))
    assert exit_info.value.code == 0
    assert "has already finished (5 iterations, 40 steps): nothing to do" in capsys.readouterr().out


def test_a_stop_signal_writes_a_checkpoint_stops_the_loop_and_exits_75(tmp_path, capsys):
    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    assert not run.stop_requested and list_checkpoints(run.dir) == []
    os.kill(os.getpid(), signal.SIGTERM)  # handled: the process goes on
    assert not run.stop_requested  # ...until the iteration ends
    run.end_iteration(2, 16, [], {"x": 2})
    assert run.stop_requested
    (checkpoint,) = list_checkpoints(run.dir)
    assert read_checkpoint(checkpoint)["iteration"] == 2
    assert run.finish() == CHECKPOINT_EXIT
    err = capsys.readouterr().err
    assert "received SIGTERM: finishing this iteration" in err
    assert f"continue with: python {sys.argv[0]} --resume {run.dir})" in err


def test_a_finished_run_puts_back_the_signal_handlers_it_replaced(tmp_path, capsys):
    """A notebook or a test that used a Run carries on with its own handlers, whether the run
    ends with `finish()`, with a `with` block, or after a stop signal."""

    def mine(signum, frame):
        pass

    # Every stop signal gets a handler of ours first: one the test's process inherited as ignored
    # (SIGHUP under nohup) stays ignored by the run, as it should, and would fail the check below.
    pytests = {signum: signal.signal(signum, mine) for signum in STOP_SIGNALS}
    try:
        check_the_handlers_are_put_back(tmp_path, mine)
    finally:
        for signum, handler in pytests.items():
            signal.signal(signum, handler)


def check_the_handlers_are_put_back(tmp_path, mine):
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    assert set(before.values()) == {mine}
    run = open_run(tmp_path)
    assert all(signal.getsignal(signum) == run.on_stop_signal for signum in STOP_SIGNALS)
    run.restore({})
    os.kill(os.getpid(), signal.SIGUSR1)  # handled by the run: a checkpoint, then stop
    run.end_iteration(1, 8, [], {})
    assert run.finish() == CHECKPOINT_EXIT
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before
    with open_run(tmp_path) as run:
        assert signal.getsignal(signal.SIGTERM) == run.on_stop_signal
        run.restore({})
        run.end_iteration(1, 8, [], {})
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before
    assert run.finished and run.finish() == 0  # finishing again changes nothing


def process_state() -> tuple:
    """What a run may change in its process: the stop signals' handlers, the excepthook, stdout."""
    handlers = tuple(signal.getsignal(signum) for signum in STOP_SIGNALS)
    return handlers, sys.excepthook, sys.stdout


class OtherRank:
    """The `Distributed` of rank 1 of 2, without a process group (what `Run` asks of it)."""

    rank, world_size = 1, 2

    def agreed_stop(self, signum):
        return signum

    def gather(self, value):
        return None

    def close(self, wait=True):
        pass


class SignalledWhileAgreeing(OtherRank):
    """Rank 1 of 2, which gets SIGTERM while the ranks agree on the first iteration's stop (its
    part, no signal, sent; a rank waits there for the slowest): the agreement is none."""

    agreements = 0

    def agreed_stop(self, signum):
        self.agreements += 1
        if self.agreements == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return signum


def test_a_signal_that_comes_while_the_ranks_agree_stops_the_run_after_the_next_agreement(
    tmp_path,
):
    """Not lost (the agreement's none once wrote over it: the rank trained on to its end, and a
    preemption's SIGTERM lost the iterations since the last checkpoint), and not acted on by this
    rank alone (the others go on after the agreement): all stop together, one iteration later."""
    with Run(
        torch_script.Args(**SMALL), SCRIPT, str(tmp_path), dist=SignalledWhileAgreeing()
    ) as run:
        derive_sizes(run.args)
        run.start()
        run.restore({})
        run.end_iteration(1, 8, [], {})
        assert not run.stop_requested and run.stop.signal == signal.SIGTERM
        run.end_iteration(2, 16, [], {})
        assert run.stop_requested and run.exit_code() == CHECKPOINT_EXIT


def test_a_run_used_twice_in_one_process_leaves_it_as_it_found_it(tmp_path, capsys):
    """Signal handlers, `sys.excepthook` and `sys.stdout` are the process's again after each run
    (one rank; on another rank, stdout is os.devnull while the run lives), however it ends:
    finished, stopped by a signal, or by a `RunError` in the constructor."""

    def hook(*exc_info):
        pass

    original_hook = sys.excepthook
    sys.excepthook = hook
    try:
        before = process_state()
        for signum in (None, signal.SIGTERM):
            with open_run(tmp_path) as run:
                assert process_state() != before  # (the run's handlers)
                run.restore({})
                if signum is not None:
                    os.kill(os.getpid(), signum)
                sys.excepthook = print  # (what a library the run started may do)
                for iteration in range(1, 6):
                    run.end_iteration(iteration, 8 * iteration, [], {})
                    if run.stop_requested:
                        break
            assert process_state() == before
        assert run.exit_code() == CHECKPOINT_EXIT
        with pytest.raises(RunError):
            Run(torch_script.Args(exp_name="a/b"), SCRIPT, runs_dir=str(tmp_path))
        assert process_state() == before
        with pytest.raises(RunError), open_run(tmp_path, resume=str(run.dir)) as resumed:
            resumed.restore({"not_checkpointed": 1})  # (an error inside the block)
        release_run_folder(resumed.lock_fd)
        assert process_state() == before
        with Run(torch_script.Args(**SMALL), SCRIPT, str(tmp_path), dist=OtherRank()) as run:
            assert sys.stdout is not before[2]  # (rank 1's lines would repeat rank 0's)
            derive_sizes(run.args)
            run.start()
            run.restore({})
        assert process_state() == before
    finally:
        sys.excepthook = original_hook


def test_checkpoints_keep_the_newest_two_and_hold_what_tensorboard_shows(tmp_path):
    run = open_run(tmp_path, checkpoint_every=1)
    writer = run.writer
    run.restore({})
    for iteration in (1, 2, 3):
        writer.add_scalar("losses/x", float(iteration), 8 * iteration)
        run.end_iteration(iteration, 8 * iteration, [], {})
    names = [p.name for p in list_checkpoints(run.dir)]
    assert names == ["checkpoint_0000003.ckpt", "checkpoint_0000002.ckpt"] and KEEP == 2
    # flushed before each checkpoint: TensorBoard already holds every scalar up to it
    assert [s for s, _ in read_scalars(run.dir)["losses/x"]] == [8, 16, 24]
    run.finish()


def test_a_state_no_longer_finite_ends_the_run_in_one_line_keeping_the_last_finite_checkpoint(
    tmp_path,
):
    """Never a checkpoint of NaN: the iteration whose end finds one is named, and the newest
    checkpoint, the one before, is the last finite one (as it was, it was pushed out)."""
    agent, optimizer = torch_objects(1)
    state = {"agent": agent, "optimizer": optimizer, "avg_returns": deque([1.0])}
    with pytest.raises(RunError) as error, open_run(tmp_path, checkpoint_every=1) as run:
        run.restore(state)
        for iteration in (1, 2):
            train_step(agent, optimizer)
            run.end_iteration(iteration, 8 * iteration, [], state)
        with torch.no_grad():
            agent.actor.weight[0, 0] = float("inf")
        run.end_iteration(3, 24, [], state)
    assert error.value.code == 1
    assert error.value.message.startswith(
        "iteration 3: the training diverged: agent holds NaN or infinite values (a learning "
        "rate too large? --learning-rate 0.00025); the newest checkpoint, of iteration 2 ("
    )
    assert [p.name for p in list_checkpoints(run.dir)] == [
        "checkpoint_0000002.ckpt",
        "checkpoint_0000001.ckpt",
    ]
    assert run.finished and run.lock_fd is None  # closed: TensorBoard flushed, the lock let go


def test_a_value_replaced_in_the_state_is_checked_at_every_iteration_s_end(tmp_path):
    """The JAX scripts replace their values in the dict (a `TrainState` cannot change in place):
    the dict is checked at each iteration's end, not only when a checkpoint is due, so a run that
    diverges stops at the iteration that made the NaN (JAX raises nothing)."""
    state = {"agent": np.ones(2, np.float32)}
    with pytest.raises(RunError) as error, open_run(tmp_path, checkpoint_every=0) as run:
        run.restore(state)
        run.end_iteration(1, 8, [], state)
        state.update(agent=np.array([1.0, np.nan], np.float32))
        run.end_iteration(2, 16, [], state)
    assert error.value.message.startswith("iteration 2: the training diverged: agent holds NaN")
    assert "no checkpoint was written" in error.value.message


def test_end_iteration_takes_only_the_dict_given_to_restore(tmp_path):
    """A forked script that passes a function (the older form) or one of its values is told in
    one line what to pass, before anything is logged or written."""
    state = {"agent": np.ones(2, np.float32)}
    with open_run(tmp_path, checkpoint_every=1) as run:
        run.restore(state)
        for given in (lambda: state, state["agent"]):
            with pytest.raises(TypeError, match="end_iteration takes the dict given to restore"):
                run.end_iteration(1, 8, [], given)
        assert list_checkpoints(run.dir) == [] and run.iteration == 0
        run.end_iteration(1, 8, [], state)
    assert [p.name for p in list_checkpoints(run.dir)] == ["checkpoint_0000001.ckpt"]


def test_a_crash_of_a_state_no_longer_finite_in_an_iteration_is_said_as_that(tmp_path):
    """torch's Categorical refuses NaN logits (a ValueError) in the update or the next rollout,
    before the iteration ends: the run ends with the same line, naming that iteration."""
    agent, optimizer = torch_objects(1)
    state = {"agent": agent, "optimizer": optimizer}
    with pytest.raises(RunError) as error, open_run(tmp_path, checkpoint_every=1) as run:
        run.restore(state)
        run.end_iteration(1, 8, [], state)
        with torch.no_grad():
            agent.network[0].weight.fill_(float("nan"))
        train_step(agent, optimizer)
    # (ValueError with torch.distributions validating arguments, else multinomial's RuntimeError)
    assert isinstance(error.value.__cause__, (ValueError, RuntimeError))
    assert error.value.message.startswith("iteration 2: the training diverged: agent holds NaN")
    assert "the newest checkpoint, of iteration 1" in error.value.message
    # a crash of finite values is left as it is
    with pytest.raises(KeyError), open_run(tmp_path) as run:
        run.restore({"agent": torch_objects(1)[0]})
        raise KeyError("not a divergence")


def test_a_crash_of_non_finite_values_in_the_first_iteration_is_the_diverged_line(tmp_path):
    """`--learning-rate 1e6`: the first step makes the parameters huge but finite, the next
    forward pass overflows, and Categorical refuses the NaN logits, before any iteration ended:
    the same line as a later divergence (it was the raw traceback)."""
    agent, optimizer = torch_objects(1)
    state = {"agent": agent, "optimizer": optimizer}
    with pytest.raises(RunError) as error, open_run(tmp_path, checkpoint_every=1) as run:
        run.restore(state)
        with torch.no_grad():
            for parameter in agent.parameters():
                parameter.fill_(1e30)
        train_step(agent, optimizer)
    assert isinstance(error.value.__cause__, (ValueError, RuntimeError)) and error.value.code == 1
    # which of torch's checks sees it first depends on `Distribution`'s argument validation,
    # which a script imported earlier in the same process may have turned off
    said = "the agent's output (logits)", "the agent's output (action probabilities)"
    message = error.value.message
    assert any(
        message.startswith(
            f"iteration 1: the training diverged: {output} holds NaN or infinite values (a "
            "learning rate too large? --learning-rate 0.00025); no checkpoint was written"
        )
        for output in said
    ), message
    assert run.finished and run.lock_fd is None


def test_a_jax_state_no_longer_finite_is_found():
    jax = pytest.importorskip("jax")
    import optax
    from flax.training.train_state import TrainState

    from cleanrl_utils.run.diverged import not_finite

    params = {"w": jax.numpy.ones((3, 2)), "b": jax.numpy.zeros(2)}
    agent_state = TrainState.create(apply_fn=None, params=params, tx=optax.adam(1e-3))
    state = {"agent_state": agent_state, "key": jax.random.PRNGKey(0), "avg": deque([1.0])}
    assert not_finite(state) == []
    params = dict(params, b=params["b"].at[1].set(jax.numpy.nan))
    assert not_finite(state | {"agent_state": agent_state.replace(params=params)}) == [
        "agent_state"
    ]


def test_laps_time_each_phase_and_end_iteration_logs_them(tmp_path):
    run = open_run(tmp_path)
    run.restore({})
    time.sleep(0.05)
    run.lap("rollout")
    time.sleep(0.02)
    run.lap("update")
    assert run.laps_s == run.laps["rollout"] + run.laps["update"] > 0.06
    run.end_iteration(1, 8, [3.0], {})
    run.finish()
    scalars = read_scalars(run.dir)
    (rollout,) = scalars["time/rollout"]
    (update,) = scalars["time/update"]
    assert rollout[0] == update[0] == 8
    assert 0.04 < rollout[1] < 1.0 and 0.015 < update[1] < 1.0


def test_config_json_records_the_run_and_each_resumption(tmp_path):
    run = open_run(tmp_path, checkpoint_every=1)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    run.finish()
    sys_argv = sys.argv
    sys.argv = ["ppo_atari_envpool.py", "--resume", str(run.dir)]
    try:
        resumed = open_run(tmp_path, resume=str(run.dir))
        resumed.restore({})  # (a resume writes into the folder once its checkpoint is checked)
        resumed.finish()
    finally:
        sys.argv = sys_argv
    config = json.loads((run.dir / "config.json").read_text())
    assert config["run_name"] == run.name and config["args"]["num_envs"] == 2
    assert len(config["resumes"]) == 1 and "--resume" in config["resumes"][0]["command"]


def test_checkpoints_written_before_the_lifecycle_module_still_resume(tmp_path):
    """Checkpoints of the previous layout kept the training time inside the script's state."""
    run = open_run(tmp_path, checkpoint_every=1)
    run.restore({})
    run.end_iteration(1, 8, [], {"avg_returns": [4.0]})
    run.finish()
    path = list_checkpoints(run.dir)[0]
    payload = read_checkpoint(path)
    payload["state"]["elapsed"] = payload.pop("elapsed") + 1000.0
    payload["state"]["lstm_state"] = "not read by any resume"
    write_checkpoint(path, payload)
    resumed = open_run(tmp_path, resume=str(run.dir))
    avg = deque(maxlen=20)
    resumed.restore({"avg_returns": avg})
    assert list(avg) == [4.0] and time.time() - resumed.start_time > 1000.0
    resumed.finish()


def finished_run(runs_dir: Path, **flags) -> Run:
    run = open_run(runs_dir, **flags)
    run.restore({})
    for iteration in range(1, run.args.num_iterations + 1):
        run.end_iteration(iteration, 8 * iteration, [], {})
    run.finish()
    return run


def stopped_run(runs_dir: Path, **flags) -> Run:
    run = open_run(runs_dir, checkpoint_every=1, **flags)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    run.finish()
    return run


def test_resume_auto_picks_the_newest_unfinished_run_not_a_newer_finished_one(tmp_path, capsys):
    stopped = stopped_run(tmp_path)
    time.sleep(1.1)  # run names carry the start time in seconds
    finished = finished_run(tmp_path)
    assert stopped.name < finished.name
    capsys.readouterr()
    resumed = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert resumed.name == stopped.name and resumed.start_iteration == 2
    assert f"the newest unfinished run is {stopped.name}" in capsys.readouterr().err
    # with only finished runs, a new run starts, and says why
    shutil.rmtree(stopped.dir)
    fresh = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert fresh.start_iteration == 1 and fresh.name not in (stopped.name, finished.name)
    err = capsys.readouterr().err
    assert "no unfinished run" in err and f"(1 finished: {finished.name})" in err


def test_in_a_slurm_task_resume_auto_takes_only_the_run_that_task_started(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("SLURM_JOB_ID", "101")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "100")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    own = stopped_run(tmp_path)
    assert json.loads((own.dir / "config.json").read_text())["slurm"] == {
        "job_id": "101",
        "array_job_id": "100",
        "array_task_id": "3",
    }
    time.sleep(1.1)
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "200")  # another sweep, same exp, env and seed
    other = stopped_run(tmp_path)
    assert other.name > own.name
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "100")  # the first task, requeued
    resumed = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert resumed.name == own.name
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "4")  # a task that started nothing yet
    fresh = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert fresh.start_iteration == 1
    assert "started by this SLURM task" in capsys.readouterr().err


def test_config_json_records_the_command_as_typed_and_where(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["cleanrl/ppo_atari_envpool.py", "--seed", "3"])
    run = stopped_run(tmp_path)
    config = json.loads((run.dir / "config.json").read_text())
    assert config["command"] == ["cleanrl/ppo_atari_envpool.py", "--seed", "3"]
    assert config["cwd"] == os.getcwd() and config["slurm"] is None or "SLURM_JOB_ID" in os.environ


def test_ctrl_c_finishes_the_iteration_checkpoints_and_exits_130_a_second_stops_at_once(
    tmp_path, capsys
):
    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    time.sleep(0.02)
    run.end_iteration(1, 8, [], {})
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: handled, the iteration goes on
    assert signal.getsignal(signal.SIGINT) == run.on_second_ctrl_c  # would end it at once
    run.end_iteration(2, 16, [], {"x": 2})
    assert run.stop_requested
    (checkpoint,) = list_checkpoints(run.dir)
    assert read_checkpoint(checkpoint)["iteration"] == 2
    assert run.finish() == INTERRUPTED == 130
    err = capsys.readouterr().err
    assert "received Ctrl-C: finishing this iteration (about 0 s)" in err
    assert "Ctrl-C again stops at once" in err
    assert (
        f"Ctrl-C: checkpoint of iteration 2 written to {checkpoint}; exiting with code 130" in err
    )


def test_ctrl_c_in_the_first_iteration_finishes_it_with_a_checkpoint_not_at_once(tmp_path, capsys):
    """Raised where it landed, a Ctrl-C could be swallowed (JAX's gc callback): it is recorded,
    and the first iteration ends with its checkpoint like any other (after the last iteration a
    stop ends the process at once: `test_resume.py`)."""
    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    os.kill(os.getpid(), signal.SIGINT)  # no iteration has ended yet
    run.end_iteration(1, 8, [], {"x": 1})
    assert run.stop_requested and run.finish() == INTERRUPTED
    (checkpoint,) = list_checkpoints(run.dir)
    assert read_checkpoint(checkpoint)["iteration"] == 1
    assert "received Ctrl-C: finishing this iteration, then writing" in capsys.readouterr().err


def test_a_flag_newer_than_the_checkpoint_takes_the_commands_value_and_says_so(tmp_path, capsys):
    run = stopped_run(tmp_path)
    path = list_checkpoints(run.dir)[0]
    payload = read_checkpoint(path)
    del payload["args"]["max_episode_steps"]  # as written before the flag existed
    write_checkpoint(path, payload)
    capsys.readouterr()
    args = torch_script.Args(resume=str(run.dir), max_episode_steps=27_000)
    Run(args, SCRIPT, runs_dir=str(tmp_path))
    assert args.max_episode_steps == 27_000
    assert "the checkpoint has no --max-episode-steps" in capsys.readouterr().err


def test_after_ctrl_c_the_last_line_on_a_terminal_is_the_resume_command(tmp_path, monkeypatch):
    """On a real terminal (a pseudo-terminal) the bar is left above the messages of the stop, not
    drawn again below them."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    # 24 rows of 120 columns (a new pseudo-terminal has 0 rows, where tqdm draws nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    terminal = open(slave, "w")  # noqa: SIM115 (closed below)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        run = open_run(tmp_path, checkpoint_every=0)
        run.restore({})
        assert run.progress.bar is not None  # (a terminal: a bar, not plain lines)
        time.sleep(0.02)
        run.end_iteration(1, 8, [], {})
        os.kill(os.getpid(), signal.SIGINT)
        run.end_iteration(2, 16, [], {})
        assert run.finish() == INTERRUPTED
        terminal.flush()
        # the kernel hands what was written to the master side in chunks, later under load: read
        # until the resume command has come and nothing more comes for a moment
        resume = f"(continue with: python {sys.argv[0]} --resume {run.dir})"
        received, deadline = b"", time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                received += os.read(master, 1 << 16)
            elif resume.encode() in received:
                break
        screen = received.decode(errors="replace")
    finally:
        terminal.close()
        os.close(master)
    assert "16/40" in screen  # the bar was drawn
    assert screen.rstrip().endswith(resume), repr(screen[-300:])


SECOND_CTRL_C = """
import os, pathlib, signal, sys, time
sys.path.insert(0, {tests!r})
from run_testing import open_run
run = open_run(pathlib.Path({runs!r}), checkpoint_every=2)
run.restore({{}})
time.sleep(0.02)
run.end_iteration(1, 8, [], {{}})
run.end_iteration(2, 16, [], {{}})  # a checkpoint
run.end_iteration(3, 24, [], {{}})
os.kill(os.getpid(), signal.SIGINT)  # finish the iteration, then stop...
os.kill(os.getpid(), signal.SIGINT)  # ...no: now
print("still alive", flush=True)
"""


def test_a_second_ctrl_c_stops_at_once_and_says_what_is_lost(tmp_path):
    import subprocess

    code = SECOND_CTRL_C.format(tests=str(REPO_ROOT / "tests"), runs=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.returncode == -signal.SIGINT, proc.stderr  # ended by the signal itself
    assert "still alive" not in proc.stdout
    line = proc.stderr.strip().splitlines()[-1]
    (run_dir,) = tmp_path.glob("Breakout-v5__*")
    assert line == (
        "received Ctrl-C again: stopping now, without a checkpoint; the 8 steps trained since the "
        "checkpoint of iteration 2 and the iteration under way are lost (continue from that "
        f"checkpoint with: python -c --resume {run_dir})"
    )


def test_the_report_calls_a_run_stopped_right_after_a_stop_and_running_once_resumed(tmp_path):
    from cleanrl_utils.report.loading import load_run

    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    time.sleep(0.02)
    run.writer.add_scalar("charts/SPS", 100.0, 8)
    run.end_iteration(1, 8, [], {})
    assert load_run(run.dir, 10.0, time.time()).status == "running"  # (while it runs)
    os.kill(os.getpid(), signal.SIGTERM)
    run.writer.add_scalar("charts/SPS", 100.0, 16)
    run.end_iteration(2, 16, [], {})
    run.finish()
    log = load_run(run.dir, 10.0, time.time())
    assert log.status == "resumable", log.problems
    (note,) = [p for p in log.problems if "stopped" in p]
    assert "(16 of 40 steps, stopped by SIGTERM 0 min ago, checkpointed)" in note

    resumed = open_run(tmp_path, resume=str(run.dir))  # running again: no longer stopped
    resumed.restore({})  # (a resumed run writes config.json once its checkpoint is checked)
    assert "stopped" not in json.loads((resumed.dir / "config.json").read_text())
    assert load_run(run.dir, 10.0, time.time()).status == "running"


# -- what a fault probe found at the run's edges ------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_before_training_ends_at_the_next_safe_point_in_one_line(tmp_path, capsys, signum):
    """Once `start` has the handlers, a stop while the envs are built is recorded, and `restore`
    (before the first iteration) ends the run: 75 for SIGTERM (requeued), 130 for Ctrl-C."""
    run = open_run(tmp_path)
    os.kill(os.getpid(), signum)  # handled: recorded, not raised where it lands
    with pytest.raises(SystemExit) as exit_info, entry_point():
        run.restore({})
    assert exit_info.value.code == (INTERRUPTED if signum == signal.SIGINT else 75)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("received ") and "before training began: stopping" in line, line
    assert json.loads((run.dir / "config.json").read_text())["stopped"]["global_step"] == 0
    assert signal.getsignal(signal.SIGTERM) != run.on_stop_signal  # (handlers given back)


def test_a_stop_in_the_last_iteration_leaves_the_steps_after_training_to_the_resume(
    tmp_path, capsys
):
    run = open_run(tmp_path, save_model=True)
    run.restore({})
    for iteration in range(1, 5):
        run.end_iteration(iteration, 8 * iteration, [], {})
    os.kill(os.getpid(), signal.SIGTERM)
    run.end_iteration(5, 40, [], {})  # the last iteration, stopped: its checkpoint, then 75
    assert run.stop_requested and run.finish() == CHECKPOINT_EXIT
    config = json.loads((run.dir / "config.json").read_text())
    assert config["finished"] is None and "stopped" in config
    capsys.readouterr()
    resumed = open_run(tmp_path, resume=str(run.dir))  # the resume command printed: the folder
    assert resumed.args.save_model  # (carried on from the checkpoint, not given again)
    assert "(the steps after training, 40 steps)" in capsys.readouterr().out
    resumed.restore({})
    assert resumed.after_training and range(resumed.start_iteration, 6) == range(6, 6)
    assert resumed.finish() == 0
    assert json.loads((run.dir / "config.json").read_text())["finished"]["global_step"] == 40
    with pytest.raises(SystemExit) as exit_info, entry_point():  # done, and recorded: nothing to do
        Run(torch_script.Args(resume=str(run.dir)), SCRIPT, runs_dir=str(tmp_path))
    assert exit_info.value.code == 0
    assert "has already finished (5 iterations, 40 steps): nothing to do" in capsys.readouterr().out


def test_a_stop_during_the_last_checkpoint_write_leaves_the_steps_after_training_to_the_resume(
    tmp_path, capsys, monkeypatch
):
    """SIGTERM while the last iteration's checkpoint is written: that checkpoint is the stop's;
    exit code 75, the model file, the evaluation games and the upload left to the resume (the
    run wrote the model, played every game and exited 0)."""
    import cleanrl_utils.run.checkpoints as checkpoints

    run = open_run(tmp_path, save_model=True)
    run.restore({})
    for iteration in range(1, 5):
        run.end_iteration(iteration, 8 * iteration, [], {})

    def write_during_sigterm(path, payload):
        os.kill(os.getpid(), signal.SIGTERM)
        write_checkpoint(path, payload)

    monkeypatch.setattr(checkpoints, "write_checkpoint", write_during_sigterm)
    run.end_iteration(5, 40, [], {"x": 5})
    assert run.stop_requested and not run.after_training
    done = []
    finish_training(run, done.append, lambda **games: done.append(games) or [])
    assert done == []  # nothing after training: the resume does it
    assert run.finish() == CHECKPOINT_EXIT
    config = json.loads((run.dir / "config.json").read_text())
    assert config["stopped"]["signal"] == "SIGTERM" and config["finished"] is None
    checkpoint = list_checkpoints(run.dir)[0]
    assert read_checkpoint(checkpoint)["iteration"] == 5
    err = capsys.readouterr().err
    assert (
        f"SIGTERM: checkpoint of iteration 5 written to {checkpoint}; exiting with code 75" in err
    )


def test_evaluation_videos_on_a_full_disk_are_one_line_and_exit_code_74(tmp_path, monkeypatch):
    """`--capture-video` with videos/ on a full disk (the video's file is /dev/full): after
    training, one `error:` line naming the videos' folder and the cause, exit code 74, the run
    not recorded finished; its resume does the steps after training (it was ffmpeg's broken
    pipe, a traceback and exit code 1)."""
    from cleanrl_utils.envs.video import VideoWriter, run_videos

    monkeypatch.chdir(tmp_path)
    run = open_run(Path("runs"), capture_video=True)
    run.restore({})
    for iteration in range(1, 6):
        run.end_iteration(iteration, 8 * iteration, [], {})
    videos = run_videos(run.name)
    videos.mkdir(parents=True)
    (videos / ".eval-episode-0.tmp.mp4").symlink_to("/dev/full")  # (the file ffmpeg writes)

    def evaluate(video_dir, **games):  # (what `play_games` does with a game's frames)
        video = VideoWriter(Path(video_dir) / "eval-episode-0.mp4")
        for _ in range(30):
            video.append(np.zeros((210, 160, 3), dtype=np.uint8))
        video.close()
        return [1.0]

    with pytest.raises(RunError) as error:
        finish_training(run, None, evaluate)
    assert error.value.code == 74
    assert error.value.line == (
        f"error: --capture-video: cannot write the evaluation's videos in {videos}/: no space "
        f"left on device (ENOSPC); the training is done and the newest checkpoint, "
        f"checkpoint_0000005.ckpt, is intact: free some space and continue with: "
        f"{run.resume_command()}"
    )
    run.process.give_back()  # (what leaving the script's `with Run(...)` block does)
    release_run_folder(run.lock_fd)
    assert json.loads((run.dir / "config.json").read_text())["finished"] is None
    again = open_run(Path("runs"), resume=str(run.dir), capture_video=True)
    again.restore({})
    assert again.after_training


def test_the_first_stop_decides_how_the_run_ends(tmp_path, capsys):
    """SIGTERM (SLURM preempting the job), then Ctrl-C 50 ms later: the run ends as SIGTERM
    asked, 75 (requeued) and recorded as SIGTERM (it exited 130, recorded as Ctrl-C, and SLURM
    did not requeue it). The Ctrl-C is said, and arms the second that stops at once."""
    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) == run.on_second_ctrl_c
    run.end_iteration(2, 16, [], {})
    assert run.stop_requested and run.finish() == CHECKPOINT_EXIT
    assert json.loads((run.dir / "config.json").read_text())["stopped"]["signal"] == "SIGTERM"
    err = capsys.readouterr().err
    assert (
        "received Ctrl-C: already stopping on SIGTERM, which came first (exit code 75); Ctrl-C "
        "again stops at once"
    ) in err
    assert "SIGTERM: checkpoint of iteration 2 written" in err and "exiting with code 75" in err


def test_sighup_stops_a_run_like_sigterm_and_stays_ignored_under_nohup(tmp_path, capsys):
    """A closed terminal (SIGHUP): a checkpoint and 75, resumable (it ended the run with none).
    Under `nohup`, which ignores SIGHUP, the run keeps it ignored and trains on."""
    got = []
    signal.signal(signal.SIGHUP, lambda signum, frame: got.append(signum))  # (the test's own)
    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    os.kill(os.getpid(), signal.SIGHUP)
    run.end_iteration(1, 8, [], {})
    assert run.stop_requested and run.finish() == CHECKPOINT_EXIT and got == []
    assert json.loads((run.dir / "config.json").read_text())["stopped"]["signal"] == "SIGHUP"
    assert "received SIGHUP: finishing this iteration" in capsys.readouterr().err

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    with open_run(tmp_path, checkpoint_every=0) as run:
        run.restore({})
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)
        run.end_iteration(1, 8, [], {})
        assert not run.stop_requested
    assert run.exit_code() == 0


def test_resume_writes_into_the_folder_named_not_the_one_its_checkpoint_records(
    tmp_path, capsys, monkeypatch
):
    """A copied run folder is a run of its own, named after its folder; a loose checkpoint's
    folder is the run folder. Paths are printed as given (relative stays relative)."""
    monkeypatch.chdir(tmp_path)
    run = stopped_run(Path("runs"))
    original = {p.name: p.read_bytes() for p in run.dir.iterdir()}
    copy = Path("runs") / f"{run.name}-copy"
    shutil.copytree(run.dir, copy)
    capsys.readouterr()
    resumed = open_run(Path("runs"), resume=f"runs/{copy.name}/")
    assert (resumed.dir, resumed.name) == (copy, copy.name)
    assert f"logging to runs/{copy.name}/ (see it with: tensorboard --logdir runs)" in (
        capsys.readouterr().out
    )
    resumed.restore({})
    resumed.end_iteration(2, 16, [], {})
    resumed.finish()
    assert {p.name: p.read_bytes() for p in run.dir.iterdir()} == original  # untouched
    config = json.loads((copy / "config.json").read_text())
    assert config["run_name"] == copy.name and config["resumes"][0]["run_name_was"] == run.name
    assert read_checkpoint(list_checkpoints(copy)[0])["run_name"] == copy.name

    loose = Path("downloads/shared/checkpoint.ckpt")
    loose.parent.mkdir(parents=True)
    shutil.copy(list_checkpoints(run.dir)[0], loose)
    resumed = open_run(Path("runs"), resume=str(loose))
    assert resumed.dir == loose.parent and resumed.name == "shared"
    resumed.restore({})
    resumed.end_iteration(2, 16, [], {})
    resumed.finish()
    assert sorted(p.name for p in Path("downloads").iterdir()) == ["shared"]
    assert loose.exists() and list_checkpoints(loose.parent) == [
        loose.parent / "checkpoint_0000002.ckpt"
    ]


def test_checkpoints_are_ordered_by_iteration_and_files_the_run_did_not_write_are_left_alone(
    tmp_path,
):
    run = open_run(tmp_path, checkpoint_every=1, total_timesteps=8 * 20_000_000)
    run.restore({})
    for name in ("checkpoint_best.ckpt", "checkpoint_99999999.ckpt.bak", "checkpoint_12.ckpt"):
        (run.dir / name).write_bytes(b"a user's file")
    for iteration in (9_999_999, 10_000_000, 10_000_001):
        run.end_iteration(iteration, 8 * iteration, [], {"x": iteration})
    names = sorted(p.name for p in run.dir.glob("checkpoint*"))
    assert names == [
        "checkpoint_10000000.ckpt",
        "checkpoint_10000001.ckpt",
        "checkpoint_12.ckpt",
        "checkpoint_99999999.ckpt.bak",
        "checkpoint_best.ckpt",
    ]
    run.finish()
    write_checkpoint(run.dir / "checkpoint_best.ckpt", read_checkpoint(run.dir / names[0]))
    resumed = Run(torch_script.Args(resume=str(run.dir)), SCRIPT, runs_dir=str(tmp_path))
    assert resumed.start_iteration == 10_000_002  # the newest by iteration, not the user's file


def test_a_fifo_named_like_a_checkpoint_is_never_opened(tmp_path, capsys):
    """Opening a FIFO for reading waits for a writer: a watchdog plays the writer, so that the
    test ends either way, and says whether a reader ever waited."""
    import threading

    run = stopped_run(tmp_path)
    fifo = run.dir / "checkpoint_0000009.ckpt"
    os.mkfifo(fifo)
    waited, done = [], threading.Event()

    def writer():
        while not done.wait(0.05):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # (a reader is waiting)
                waited.append(True)
            except OSError:
                pass

    watchdog = threading.Thread(target=writer)
    watchdog.start()
    try:
        for target in (str(run.dir), "auto"):
            resumed = Run(torch_script.Args(resume=target, **SMALL), SCRIPT, runs_dir=str(tmp_path))
            assert resumed.start_iteration == 2
        with pytest.raises(SystemExit) as exit_info, entry_point():
            Run(torch_script.Args(resume=str(fifo)), SCRIPT, runs_dir=str(tmp_path))
    finally:
        done.set()
        watchdog.join()
    assert waited == [] and exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --resume {fifo}: not a checkpoint file (a FIFO, a device or a socket)"
    )


@pytest.mark.parametrize("content", ["[1, 2]", "null", '{"resumes": "abc"}', "{not json"])
def test_a_config_json_of_another_shape_is_written_anew_on_resume(tmp_path, capsys, content):
    run = stopped_run(tmp_path)
    (run.dir / "config.json").write_text(content)
    capsys.readouterr()
    resumed = open_run(tmp_path, resume=str(run.dir))
    resumed.restore({})
    resumed.finish()
    err = capsys.readouterr().err
    assert f"warning: {run.dir}/config.json is " in err and "Traceback" not in err
    config = json.loads((run.dir / "config.json").read_text())
    assert config["run_name"] == run.name and config["args"]["num_envs"] == 2


def test_in_a_slurm_task_a_damaged_config_json_is_passed_over_with_a_warning(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("SLURM_JOB_ID", "101")
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID", raising=False)
    run = stopped_run(tmp_path)
    (run.dir / "config.json").write_text('{"slurm": [1]}')  # (of another shape inside)
    assert (
        Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path)).payload
        is None
    )
    (run.dir / "config.json").write_text("[1, 2]")
    capsys.readouterr()
    fresh = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert fresh.payload is None  # a new run, not a traceback in every task of the name
    assert f"{run.dir}/config.json is a JSON list, not an object" in capsys.readouterr().err


def test_a_runs_folder_that_is_a_file_is_exit_74_in_one_line(tmp_path, capsys):
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(SystemExit) as exit_info, entry_point():
        open_run(tmp_path / "runs")
    assert exit_info.value.code == 74
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: cannot create the run folder ")
    assert f"{tmp_path / 'runs'} is a file, not a folder" in line


def test_a_read_only_runs_folder_is_exit_74_naming_the_cause(tmp_path, capsys):
    import subprocess

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only file system is a tmpfs mounted by the test: needs root")
    disk = tmp_path / "ro"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with pytest.raises(SystemExit) as exit_info, entry_point():
            open_run(disk / "runs")
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
    assert exit_info.value.code == 74
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "read-only file system (EROFS)" in line and "make the folder writable" in line
    assert "free some space" not in line


def test_a_run_folder_deleted_under_the_run_is_exit_74_saying_so(tmp_path, capsys):
    run = open_run(tmp_path, checkpoint_every=1)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    shutil.rmtree(run.dir)
    with pytest.raises(SystemExit) as exit_info, entry_point():
        run.end_iteration(2, 16, [], {})
    assert exit_info.value.code == 74
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "the run folder is gone (deleted, moved or unmounted)" in line
    assert "free some space" not in line and not run.dir.exists()  # (not made again, empty)


def test_a_budget_that_is_not_a_whole_number_of_batches_says_what_is_trained(tmp_path, capsys):
    """Said by `start`, once the input is checked (bad input stays one line), for every script."""
    open_run(tmp_path, num_envs=3, num_steps=128, total_timesteps=4096).finish()
    assert capsys.readouterr().out.splitlines()[0] == (
        "note: training 3,840 steps, 10 iterations of 384: --total-timesteps 4,096 is not a "
        "whole number of batches (num_envs * num_steps = 3 * 128)"
    )
    open_run(tmp_path, num_envs=2, num_steps=128, total_timesteps=4096).finish()
    assert "note:" not in capsys.readouterr().out


def test_the_advice_after_a_failed_write_fits_its_cause(tmp_path):
    import errno

    from cleanrl_utils.run.folder_guard import kept_after

    newest = [tmp_path / "checkpoint_0000002.ckpt"]
    advice = {
        code: kept_after(tmp_path, OSError(code, os.strerror(code)), newest, "RESUME")
        for code in (errno.ENOSPC, errno.EACCES, errno.EROFS, errno.ENOENT)
    }
    assert advice[errno.ENOSPC] == (
        "the newest checkpoint, checkpoint_0000002.ckpt, is intact: free some space and continue "
        "with: RESUME"
    )
    for code in (errno.EACCES, errno.EROFS):  # (a permission, a file system mounted read-only)
        assert "intact: make the folder writable (or mount it read-write)" in advice[code]
    assert advice[errno.ENOENT].startswith("the run folder is gone (deleted, moved or unmounted)")


# -- a rewind, and a sweep's runs -----------------------------------------------------------------


def test_a_resume_from_an_older_checkpoint_makes_it_the_runs_line_for_every_later_resume(
    tmp_path, capsys
):
    """Checkpoints 2 and 4 in the folder, `--resume runs/RUN/checkpoint_0000002.ckpt`, stopped
    at 3: checkpoint 4 and the model file are set aside (kept, named, never chosen), config.json
    says the run was rewound from 4 to 2, the folder (the printed resume command) and `--resume
    auto` continue from 3, and the report draws the abandoned steps after 2 nowhere."""
    from cleanrl_utils.report.loading import load_run

    run = open_run(tmp_path, checkpoint_every=2)
    run.restore({})
    for iteration in (1, 2, 3, 4):  # the line that will be abandoned: returns 100 and up
        run.writer.add_scalar("charts/episodic_return", 100.0 + iteration, 8 * iteration)
        run.end_iteration(iteration, 8 * iteration, [], {"x": iteration})
    run.finish()
    abandoned = (run.dir / "checkpoint_0000004.ckpt").read_bytes()
    model = run.dir / f"{run.args.exp_name}.cleanrl_model"  # (the abandoned line's --save-model)
    model.write_bytes(b"the model of iteration 4")
    resumed = open_run(tmp_path, resume=str(run.dir / "checkpoint_0000002.ckpt"))
    state = {"x": 0}
    resumed.restore(state)
    assert state == {"x": 2} and resumed.start_iteration == 3
    resumed.writer.add_scalar("charts/episodic_return", 1.0, 24)
    os.kill(os.getpid(), signal.SIGTERM)
    resumed.end_iteration(3, 24, [], {"x": 3})
    assert resumed.finish() == CHECKPOINT_EXIT

    names = [p.name for p in list_checkpoints(run.dir)]
    assert names == ["checkpoint_0000003.ckpt", "checkpoint_0000002.ckpt"]
    set_aside = run.dir / "rewound_to_0000002"
    assert (set_aside / "checkpoint_0000004.ckpt").read_bytes() == abandoned
    assert (set_aside / model.name).read_bytes() == b"the model of iteration 4"
    assert not model.exists()
    assert "rewound to iteration 2: the run goes on from there" in capsys.readouterr().err
    (rewind,) = json.loads((run.dir / "config.json").read_text())["rewinds"]
    assert (rewind["from_iteration"], rewind["to_iteration"], rewind["global_step"]) == (4, 2, 16)
    assert rewind["set_aside"] == [
        "rewound_to_0000002/checkpoint_0000004.ckpt",
        f"rewound_to_0000002/{model.name}",
    ]
    for resume in (str(run.dir), "auto"):
        again = Run(torch_script.Args(resume=resume, **SMALL), SCRIPT, runs_dir=str(tmp_path))
        assert (again.dir, again.start_iteration) == (run.dir, 4)
    for resume in (set_aside, set_aside / "checkpoint_0000004.ckpt"):  # (not in place)
        with pytest.raises(RunError, match="holds checkpoints a rewind set aside"):
            Run(torch_script.Args(resume=str(resume), **SMALL), SCRIPT, runs_dir=str(tmp_path))
    log = load_run(run.dir, 10.0, time.time())
    assert list(log.steps) == [8, 16, 24] and list(log.returns) == [101.0, 102.0, 1.0]
    assert log.last_step == 24


class Killed(BaseException):
    """A `kill -9` at that point: nothing after it in the process runs."""


@pytest.mark.parametrize("moves_done", [0, 1])
def test_a_rewind_cut_short_by_a_kill_is_finished_by_the_next_start(
    tmp_path, monkeypatch, capsys, moves_done
):
    """Checkpoints 2 and 4 and the model file, `--resume runs/RUN/checkpoint_0000002.ckpt`
    killed before the rewind's first move or after it: config.json already says the run is
    unfinished, and the next `--resume RUN` first finishes the rewind (checkpoint 4 and the
    model file set aside in rewound_to_0000002/, recorded) and goes on from 2. (It was: the model
    file left in the run folder to be overwritten, no rewind recorded, `finished` kept.)"""
    run = open_run(tmp_path, checkpoint_every=2, total_timesteps=32)  # (4 iterations)
    run.restore({})
    for iteration in (1, 2, 3, 4):
        run.end_iteration(iteration, 8 * iteration, [], {"x": iteration})
    run.finish()
    assert json.loads((run.dir / "config.json").read_text())["finished"]
    model = run.dir / f"{run.args.exp_name}.cleanrl_model"
    model.write_bytes(b"the model of iteration 4")
    replace, moves = os.replace, []

    def killed_after(src, dst):
        if "rewound_to_" in str(dst):
            if len(moves) == moves_done:
                raise Killed
            moves.append(src)
        replace(src, dst)

    monkeypatch.setattr(os, "replace", killed_after)
    older = str(run.dir / "checkpoint_0000002.ckpt")
    resumed = open_run(tmp_path, resume=older, total_timesteps=32)
    with pytest.raises(Killed):
        resumed.restore({"x": 0})
    release_run_folder(resumed.lock_fd)  # (the kernel's, at the kill)
    monkeypatch.setattr(os, "replace", replace)
    assert model.is_file() and json.loads((run.dir / "config.json").read_text())["finished"] is None

    again = open_run(tmp_path, resume=str(run.dir), total_timesteps=32)
    state = {"x": 0}
    again.restore(state)
    assert state == {"x": 2} and again.start_iteration == 3
    set_aside = run.dir / "rewound_to_0000002"
    assert (set_aside / model.name).read_bytes() == b"the model of iteration 4"
    assert (set_aside / "checkpoint_0000004.ckpt").is_file() and not model.exists()
    assert [p.name for p in list_checkpoints(run.dir)] == ["checkpoint_0000002.ckpt"]
    assert "finished the rewind to iteration 2 that a killed process left half-made" in (
        capsys.readouterr().err
    )
    again.finish()
    config = json.loads((run.dir / "config.json").read_text())
    (rewind,) = config["rewinds"]
    assert (rewind["from_iteration"], rewind["to_iteration"]) == (4, 2) and "pending" not in rewind
    assert rewind["set_aside"] == [
        "rewound_to_0000002/checkpoint_0000004.ckpt",
        f"rewound_to_0000002/{model.name}",
    ]


def test_a_run_of_a_sweep_records_it_and_goes_on_with_its_sweeps_run_only(
    tmp_path, monkeypatch, capsys
):
    """CLEANRL_SWEEP (the launcher's): config.json's `sweep`; a run of the sweep started without
    `--resume` continues the sweep's stopped run of its exp, env id and seed (from another SLURM
    job too: the launcher run again), says that a finished one is done (exit code 0), and never
    takes another sweep's run or one started by hand."""
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "100")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")
    monkeypatch.setenv(SWEEP_VARIABLE, "sweep-a")
    stopped = stopped_run(tmp_path)
    assert json.loads((stopped.dir / "config.json").read_text())["sweep"] == "sweep-a"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "200")  # the launcher's command run again
    goes_on = Run(torch_script.Args(**SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert (goes_on.name, goes_on.start_iteration) == (stopped.name, 2)
    assert f"sweep sweep-a: its run {stopped.name} goes on" in capsys.readouterr().err
    monkeypatch.setenv(SWEEP_VARIABLE, "sweep-b")
    other = Run(torch_script.Args(resume="auto", **SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert other.start_iteration == 1 and other.name != stopped.name
    assert "sweep sweep-b: no run of ppo_atari_envpool" in capsys.readouterr().err
    monkeypatch.delenv(SWEEP_VARIABLE)
    by_hand = Run(torch_script.Args(**SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert by_hand.start_iteration == 1  # (no sweep, no --resume: a new run, as ever)

    monkeypatch.setenv(SWEEP_VARIABLE, "sweep-c")
    done = finished_run(tmp_path)
    with pytest.raises(SystemExit) as exit_info, entry_point():
        Run(torch_script.Args(**SMALL), SCRIPT, runs_dir=str(tmp_path))
    assert exit_info.value.code == 0
    assert f"run {done.name} has already finished" in capsys.readouterr().out


def test_a_run_whose_launcher_is_gone_checkpoints_and_stops_at_the_end_of_its_iteration(
    tmp_path, monkeypatch, capsys
):
    """CLEANRL_LAUNCHER (`PID:START`, set by the pool): a launcher with another start time (its
    PID reused since) is gone as surely as one with no process."""
    monkeypatch.setenv(LAUNCHER_VARIABLE, launcher_env()[LAUNCHER_VARIABLE])  # this process
    run = open_run(tmp_path, checkpoint_every=0)
    run.restore({})
    run.end_iteration(1, 8, [], {})
    assert not run.stop_requested and launcher_gone() is None
    monkeypatch.setenv(LAUNCHER_VARIABLE, f"{os.getpid()}:1")  # the same PID, started at boot
    run.end_iteration(2, 16, [], {})
    assert run.stop_requested and run.finish() == CHECKPOINT_EXIT
    assert read_checkpoint(list_checkpoints(run.dir)[0])["iteration"] == 2
    assert json.loads((run.dir / "config.json").read_text())["stopped"]["signal"] == "SIGTERM"
    err = capsys.readouterr().err
    assert f"the launcher that started this run (pid {os.getpid()}) is gone" in err


def test_a_sweeps_run_waits_for_its_earlier_process_to_stop_before_going_on(tmp_path, capsys):
    run = stopped_run(tmp_path)
    held = lock_run_folder(run.dir)  # (the earlier process, writing its last checkpoint)
    threading.Timer(1.0, release_run_folder, [held]).start()
    started = time.monotonic()
    wait_for_folder(run.dir)
    assert 0.9 < time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert f"{run.dir} is still written by process {os.getpid()}: waiting" in err
