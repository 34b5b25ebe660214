"""The report tool (`python -m cleanrl_utils.report`): exact tables from synthetic event files
with known values, plots that decode as images of the expected size, real short runs of a
training script, and bad inputs that become notes, never tracebacks."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from logs_testing import read_scalars
from report_testing import expect_usage_error, make_run, run_report, table_rows
from scripts_testing import REPO_ROOT, describe, finish_script, run_dirs, run_script, start_script

from cleanrl_utils import report
from cleanrl_utils.files.state_file import write_checkpoint


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Two script sets: three EnvPool-style scripts on *-v5 and one gymnasium script."""
    root = tmp_path_factory.mktemp("synthetic") / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [0.0] * 50 + [10.0] * 100)
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [20.0] * 30)
    make_run(root, "ppo_atari_envpool", "Pong-v5", 1, [-21.0] * 20, sps=400.0, minutes=12.0)
    make_run(root, "ppo_atari_envpool", "Pong-v5", 2, [-19.0] * 20, sps=600.0, minutes=14.0)
    make_run(root, "ppo_atari_envpool_xla_jax", "Breakout-v5", 1, [7.0] * 20)
    make_run(root, "ppo_atari", "BreakoutNoFrameskip-v4", 1, [3.0, 5.0])
    make_run(root, "ppo_atari", "BreakoutNoFrameskip-v4", 2, [1.0])
    out = root.parent / "report"
    code = run_report(out, root, extra=("--wall-clock",))
    return root, out, code


def test_returns_table_cells_are_mean_and_std_over_seeds_of_the_last_100_games(synthetic):
    _, out, code = synthetic
    assert code == 0
    rows = table_rows((out / "returns.md").read_text())
    # the EnvPool set: seed 1's last 100 games are all 10 (its first 50 zeros fall out of the
    # window), seed 2 has 30 games of 20: 15 ± 5 (population std, as the published tables)
    assert ["env", "ppo_atari_envpool", "ppo_atari_envpool_xla_jax"] in rows
    assert ["Breakout-v5", "15.00 ± 5.00", "7.00 ± 0.00 (n=1)"] in rows
    assert ["Pong-v5", "-20.00 ± 1.00", ""] in rows
    # the gymnasium set is its own table (it shares no env id with the others)
    assert ["env", "ppo_atari"] in rows
    assert ["BreakoutNoFrameskip-v4", "2.50 ± 1.50"] in rows


def test_runtimes_and_sps_are_means_over_seeds(synthetic):
    _, out, _ = synthetic
    rows = table_rows((out / "runtimes.md").read_text())
    minutes, sps = rows[: len(rows) // 2], rows[len(rows) // 2 :]
    assert ["Breakout-v5", "10.00", "10.00"] in minutes
    assert ["Pong-v5", "13.00", ""] in minutes
    assert ["Pong-v5", "500.00", ""] in sps
    assert ["BreakoutNoFrameskip-v4", "500.00"] in sps


def test_clean_runs_give_no_notes_and_a_csv_row_per_run(synthetic):
    root, out, _ = synthetic
    assert (out / "notes.md").read_text() == (  # (the only note: the aggregate skipped)
        "- protocol `published`: no human-normalised aggregate (IQM, median, mean, optimality "
        "gap, profiles, probability of improvement): fewer than `--aggregate-min-games` 5 games "
        "with random and human scores that every script ran (aggregate.md says which)\n"
    )
    with (out / "runs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(list(root.iterdir())) == 7
    assert {row["status"] for row in rows} == {"finished"}
    page = (out / "report.md").read_text()
    for heading in ("## Returns", "## Learning curves", "## Runtimes and speed", "## Notes"):
        assert heading in page
    assert "**Step budget**: 10,240 env steps per run." in page


def test_learning_curves_are_images_with_one_panel_per_env(synthetic):
    import matplotlib.image

    root, out, _ = synthetic
    expected = {
        "curves_ppo_atari.png": 1,  # BreakoutNoFrameskip-v4
        # Breakout-v5, Pong-v5: the set of two scripts, named after both
        "curves_ppo_atari_envpool+ppo_atari_envpool_xla_jax.png": 2,
        "curves_ppo_atari_wallclock.png": 1,
        "curves_ppo_atari_envpool+ppo_atari_envpool_xla_jax_wallclock.png": 2,
    }
    assert sorted(p.name for p in out.glob("*.png")) == sorted(expected)
    for name, panels in expected.items():
        image = matplotlib.image.imread(out / name)
        width, height = report.plot_size(panels)
        assert image.shape[:2] == (height, width), name
        assert image[..., :3].std() > 0.05, f"{name} is blank"
        assert f"]({name})" in (out / "curves.md").read_text()
    # for a paper: a page's width (7 inches) at 200 dpi; 3.5 inches a panel in 3 columns
    assert report.plot_size(1) == (1400, round((7 * 0.7 + 0.5) * 200)) == (1400, 1080)
    assert report.plot_size(2) == (1400, 590)  # 2 panels of 3.5 x 2.45 inches side by side
    assert report.plot_size(3) == (1400, 1080)  # never wider than a page: two rows


def test_plot_has_a_panel_per_env_in_order_and_curves_end_at_the_table_cell(synthetic, tmp_path):
    root, _, _ = synthetic
    args = report.Args(runs=(str(root),), output_dir=str(tmp_path))
    runs = [report.load_run(p, args.running_minutes, time.time()) for p in sorted(root.iterdir())]
    rep = report.Report(args, runs, [])
    panels = report.plot_set(
        rep,
        ["ppo_atari_envpool", "ppo_atari_envpool_xla_jax"],
        ["Breakout-v5", "Pong-v5"],
        tmp_path / "c.png",
        wall_clock=False,
    )
    assert panels == {"Breakout-v5": None, "Pong-v5": None}  # both have curves
    cell_runs = rep.cells["ppo_atari_envpool", "Breakout-v5"].runs
    x, mean, std = report.curve(cell_runs, args.last_n, args.curve_points, wall_clock=False)
    assert mean[-1] == pytest.approx(15.0) and std[-1] == pytest.approx(5.0)
    assert x[-1] == 10240  # both seeds run to their last step
    assert report.panel_grid(5) == (3, 2) and report.panel_grid(57) == (15, 4)


def test_per_script_pages(synthetic):
    _, out, _ = synthetic
    page = (out / "ppo_atari_envpool.md").read_text()
    assert page.startswith("# `ppo_atari_envpool`: benchmark")
    assert ["Breakout-v5", "15.00 ± 5.00"] in table_rows(page)
    assert ["Pong-v5", "13.00", "500.00"] in table_rows(page)
    assert "](curves_ppo_atari_envpool+ppo_atari_envpool_xla_jax.png)" in page


def test_event_reader_matches_tensorboard(synthetic):
    root, _, _ = synthetic
    run_dir = root / "Breakout-v5__ppo_atari_envpool__2__1700000000"
    (file,) = run_dir.glob("events.out.tfevents.*")
    data = report.read_event_file(file, (report.RETURN_TAG, report.SPS_TAG))
    expected = read_scalars(run_dir)
    for tag in (report.RETURN_TAG, report.SPS_TAG):
        assert [(s, v) for s, _, v in data.scalars[tag]] == expected[tag]
    assert data.problem is None and data.last_step == 10240


def test_human_normalised_median_and_iqm(tmp_path):
    """Five games, two identical seeds each, at 0, 0.5, 1, 1.5 and 2 human-normalised: median,
    IQM and mean are 1, the optimality gap 1 - (0 + 0.5 + 1 + 1 + 1) / 5 = 0.3, and resampling
    identical seeds cannot move them."""
    scores = report.load_human_random()
    assert len(scores) == 57 and scores["Pong"] == (-20.7, 14.6)
    root = tmp_path / "runs"
    for game, hns in zip(["Alien", "Breakout", "Pong", "Qbert", "Seaquest"], [0, 0.5, 1, 1.5, 2]):
        random, human = scores[game]
        for seed in (1, 2):
            make_run(
                root, "ppo_atari_envpool", f"{game}-v5", seed, [random + hns * (human - random)]
            )
    assert run_report(tmp_path / "out", root) == 0
    rows = table_rows((tmp_path / "out" / "aggregate.md").read_text())
    ones = "1.000 [1.000, 1.000]"
    assert rows[:2] == [
        ["script", "games", "runs", "median", "IQM", "mean", "optimality gap"],
        ["ppo_atari_envpool", "5", "10", ones, ones, ones, "0.300 [0.300, 0.300]"],
    ]


def test_bootstrap_intervals_are_the_percentiles_of_stratified_resamples():
    """The intervals are the 2.5th and 97.5th percentiles of the statistics of 500 resamples,
    each game's 3 seeds drawn with replacement from its own (drawn as rliable draws them: one
    `randint` over the seeds x games matrix per resample, from `RandomState(seed)`)."""
    import scipy.stats

    rng = np.random.default_rng(0)
    by_game = [rng.normal(g, 1.0, size=3) for g in range(8)]
    agg = report.aggregate_with_ci(by_game, samples=500, confidence=0.95, seed=1)
    matrix, rs, boot = np.stack(by_game, axis=1), np.random.RandomState(1), []
    for _ in range(500):
        drawn = matrix[rs.randint(0, 3, size=(3, 8)), np.arange(8)]
        means = drawn.mean(axis=0)
        gap = 1 - np.minimum(drawn, 1).mean()
        boot.append([np.median(means), scipy.stats.trim_mean(drawn, 0.25, None), means.mean(), gap])
    low, high = np.percentile(boot, [2.5, 97.5], axis=0)
    means = matrix.mean(axis=0)
    points = [np.median(means), scipy.stats.trim_mean(matrix, 0.25, None), means.mean()]
    points.append(1 - np.minimum(matrix, 1).mean())
    for i, name in enumerate(["median", "iqm", "mean", "optimality_gap"]):
        assert agg[name] == pytest.approx((points[i], low[i], high[i]), abs=1e-12), name
        assert low[i] < points[i] < high[i]
    assert agg == report.aggregate_with_ci(by_game, samples=500, confidence=0.95, seed=1)
    assert report.trimmed_mean(np.arange(8.0)) == pytest.approx(3.5)  # mean of 2..5
    assert report.trimmed_mean([0.0, 0.0, 1.0, 1.0, 100.0]) == pytest.approx(2 / 3)


def test_aggregate_needs_enough_games(synthetic):
    _, out, _ = synthetic
    assert "No script has enough games" in (out / "aggregate.md").read_text()


def test_comparison_with_published_numbers(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [200.0])
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [220.0])
    make_run(root, "ppo_atari_envpool", "Pong-v5", 1, [10.0], sps=1000.0)
    make_run(root, "ppo_atari_envpool", "Pong-v5", 2, [12.0], sps=1000.0)
    make_run(root, "my_variant", "Pong-v5", 1, [12.0])
    assert run_report(tmp_path / "out", root, extra=("--compare-published",)) == 0
    text = (tmp_path / "out" / "comparison.md").read_text()
    rows = table_rows(text)
    # 210 ± 10 against 211.24 ± 151.84: inside; 11 ± 1 against 20.45 ± 0.09: outside
    assert [
        "Breakout-v5", "ppo_atari_envpool", "210.00 ± 10.00", "2", "10,240",
        "211.24 ± 151.84", "3", "10,000,000", "-1.24", "yes",
    ] in rows  # fmt: skip
    assert [
        "Pong-v5", "ppo_atari_envpool", "11.00 ± 1.00", "2", "10,240",
        "20.45 ± 0.09", "3", "10,000,000", "-9.45", "no",
    ] in rows  # fmt: skip
    assert "Step budgets differ" in text
    # at 1000 steps/s, 10M steps take 166.7 minutes, against the published 178.38
    assert ["Pong-v5", "ppo_atari_envpool", "1,000", "166.7", "178.38", "0.9x"] in rows
    notes = (tmp_path / "out" / "notes.md").read_text()
    assert "no published numbers for my_variant" in notes


# ---------------------------------------------------------------------------------------------
# bad inputs: a note, never a traceback
# ---------------------------------------------------------------------------------------------


def test_folders_without_runs_are_one_error_line_and_write_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "other" / "sub").mkdir(parents=True)  # folders and files, but no run folder
    (tmp_path / "other" / "sub" / "notes.txt").write_text("not a run")
    out = tmp_path / "out"
    err = expect_usage_error(["empty", "--runs", "other", "--output-dir", str(out)], capsys)
    assert err == (
        "error: no runs under `empty`, `other` (no folder with an event file or a config.json)\n"
    )
    assert not out.exists()
    # a folder without runs next to one with a run: a note, and the run is reported
    make_run(tmp_path / "runs", "ppo_atari_envpool", "Breakout-v5", 1, [4.0])
    assert run_report(out, tmp_path / "empty", tmp_path / "runs") == 0
    assert "no runs under `" in (out / "notes.md").read_text()


def test_a_run_of_ales_spelling_is_reported_under_the_id_it_was_given(tmp_path):
    """`ALE/Breakout-v5` (ppo_atari_ale_vector.py), in the folder `ALE+Breakout-v5__...`: the
    report reads the id from config.json, not from the folder's name."""
    make_run(tmp_path / "runs", "ppo_atari_ale_vector", "ALE/Breakout-v5", 1, [4.0, 6.0])
    make_run(tmp_path / "runs", "ppo_atari_ale_vector", "ALE/Breakout-v5", 2, [8.0])
    assert run_report(tmp_path / "out", tmp_path / "runs") == 0
    rows = table_rows((tmp_path / "out" / "report.md").read_text())
    assert ["env", "ppo_atari_ale_vector"] in rows and ["ALE/Breakout-v5", "6.50 ± 1.50"] in rows


def test_missing_folder_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run_report(tmp_path / "out", tmp_path / "nowhere")
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("error: --runs:")
    with pytest.raises(SystemExit) as exc:
        report.main([str(tmp_path / "nowhere"), "--output-dir", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert (
        capsys.readouterr().err == f"error: run folder: `{tmp_path / 'nowhere'}` is not a folder\n"
    )


def test_run_folders_positional_or_after_runs_read_the_same(synthetic, tmp_path, monkeypatch):
    """`report runs/` is `report --runs runs/`: the same files, byte for byte, as the fixture's
    (made with `--runs`); positional folders and `--runs` add up; naming none reads `runs`."""
    root, out, _ = synthetic
    dirs = sorted(map(str, root.iterdir()))
    folders = {"positional": [str(root)], "both": [*dirs[:3], "--runs", *dirs[3:]]}
    for name, given in folders.items():
        assert report.main([*given, "--output-dir", str(tmp_path / name), "--wall-clock"]) == 0
        made = {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()}
        assert made == {p.name: p.read_bytes() for p in out.iterdir()}, name
    monkeypatch.chdir(root.parent)  # which holds `runs/`
    assert report.main(["--output-dir", str(tmp_path / "default"), "--wall-clock"]) == 0
    assert (tmp_path / "default" / "report.md").read_text() == (out / "report.md").read_text()


def test_bad_runs_become_notes_and_the_good_ones_are_still_reported(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [4.0])
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [6.0])
    # garbage where the event file should be
    garbage = make_run(root, "ppo_atari_envpool", "Breakout-v5", 3, [1000.0])
    (event_file,) = garbage.glob("events.out.tfevents.*")
    event_file.write_bytes(os.urandom(3000))
    # an event file cut in the middle of a record: the records before it still count
    cut = make_run(root, "ppo_atari_envpool", "Pong-v5", 1, [-20.0] * 10)
    (event_file,) = cut.glob("events.out.tfevents.*")
    event_file.write_bytes(event_file.read_bytes()[:-7])
    # a run with no finished game
    make_run(root, "ppo_atari_envpool", "Pong-v5", 2, [])
    # a run still going, and one that stopped long ago, both at half their budget
    make_run(root, "ppo_atari_envpool", "Seaquest-v5", 1, [100.0], budget=20480)
    stopped = make_run(root, "ppo_atari_envpool", "Seaquest-v5", 2, [50.0], budget=20480)
    for file in stopped.iterdir():
        os.utime(file, (time.time() - 7200, time.time() - 7200))
    # mixed step counts in one cell
    make_run(root, "ppo_atari_envpool", "Qbert-v5", 1, [300.0], total_steps=10240)
    make_run(root, "ppo_atari_envpool", "Qbert-v5", 2, [500.0], total_steps=20480, budget=10240)
    # no config.json, but a run-style name; and a folder with neither
    make_run(root, "ppo_atari_envpool", "Alien-v5", 1, [250.0], config=False)
    (root / "not_a_run").mkdir()
    (root / "not_a_run" / "config.json").write_text("{broken")

    assert run_report(tmp_path / "out", root) == 0
    out = tmp_path / "out"
    notes = (out / "notes.md").read_text()
    assert "`Breakout-v5__ppo_atari_envpool__3__1700000000`: `events.out.tfevents" in notes
    assert "corrupt record at byte 0" in notes
    assert "Pong-v5__ppo_atari_envpool__1__1700000000" in notes and "partial record" in notes
    assert "no finished game" in notes
    assert (
        "Seaquest-v5__ppo_atari_envpool__1__1700000000`: still running (10,240 of 20,480 steps"
        in notes
    )
    assert (
        "Seaquest-v5__ppo_atari_envpool__2__1700000000`: stopped early (10,240 of 20,480 steps"
        in notes
    )
    assert "left out of the tables and plots (`--include-unfinished` reports it)" in notes
    assert "Qbert-v5: mixed step counts (10,240, 20,480)" in notes
    assert "cannot tell whether it finished" in notes
    assert "`not_a_run`: unreadable config.json" in notes and "cannot tell its script" in notes
    rows = table_rows((out / "returns.md").read_text())
    assert ["Breakout-v5", "5.00 ± 1.00"] in rows  # the corrupt seed 3 is left out
    assert ["Pong-v5", "-20.00 ± 0.00 (n=1)"] in rows  # the cut file's games; seed 2 has none
    assert ["Qbert-v5", "400.00 ± 100.00"] in rows
    # its arguments unknown, it is no seed of the others: a variant of its own, in its own table
    assert ["Alien-v5", "250.00 ± 0.00"] in rows
    assert (
        "`ppo_atari_envpool`: its runs were made with different arguments, so they are 2 "
        "variants, each reported on its own and never as seeds of one: `ppo_atari_envpool` (6 "
        "runs), `ppo_atari_envpool (arguments not recorded)` (1 run)"
    ) in notes
    assert not any(row[0] == "Seaquest-v5" for row in rows)
    statuses = {row["run"]: row["status"] for row in csv.DictReader((out / "runs.csv").open())}
    assert statuses["Seaquest-v5__ppo_atari_envpool__1__1700000000"] == "running"
    assert statuses["Seaquest-v5__ppo_atari_envpool__2__1700000000"] == "stopped"
    assert statuses["Breakout-v5__ppo_atari_envpool__3__1700000000"] == "unreadable"

    # --include-unfinished reports the unfinished runs too
    assert run_report(tmp_path / "out2", root, extra=("--include-unfinished",)) == 0
    rows = table_rows((tmp_path / "out2" / "returns.md").read_text())
    assert ["Seaquest-v5", "75.00 ± 25.00"] in rows


def test_a_seed_run_twice_counts_once_the_newest_run(tmp_path):
    """Seed 1 run twice in `runs/` (start times 100 s apart in the names), and seed 2 copied into
    a second folder: two seeds, not four; the notes say which runs were left out."""
    root = tmp_path / "runs"
    older = make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [0.0], started=1700000000)
    newer = make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [10.0], started=1700000100)
    seed2 = make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [20.0])
    shutil.copytree(seed2, tmp_path / "copies" / seed2.name)
    assert run_report(tmp_path / "out", root, tmp_path / "copies") == 0
    out = tmp_path / "out"
    assert ["Breakout-v5", "15.00 ± 5.00"] in table_rows((out / "returns.md").read_text())
    notes = (out / "notes.md").read_text()
    assert (
        f"ppo_atari_envpool on Breakout-v5: 2 runs with seed 1 and the same arguments, counted "
        f"once: the newest finished run, `{newer.name}` (`{newer}`); left out: `{older}`"
    ) in notes
    assert "2 runs with seed 2 and the same arguments, counted once" in notes
    page = (out / "report.md").read_text()
    assert "**Runs**: 2 reported of 4 found" in page and "1 seed per cell" not in page
    assert len(list(csv.DictReader((out / "runs.csv").open()))) == 4  # every run still listed


def stopped_run(root: Path, seed: int, checkpoint_iteration: int | None) -> Path:
    """A run at half its budget (10 of 20 iterations of 1024 steps) whose files are two hours
    old, with a checkpoint of `checkpoint_iteration` as the scripts write it (or none)."""
    run_dir = make_run(root, "ppo_atari_envpool", "Seaquest-v5", seed, [50.0], budget=20480)
    if checkpoint_iteration is not None:
        payload = {"iteration": checkpoint_iteration, "global_step": checkpoint_iteration * 1024}
        write_checkpoint(run_dir / f"checkpoint_{checkpoint_iteration:07d}.ckpt", payload)
    for file in run_dir.iterdir():
        os.utime(file, (time.time() - 7200, time.time() - 7200))
    return run_dir


def test_a_stopped_run_with_a_checkpoint_is_resumable_and_says_how(tmp_path):
    root = tmp_path / "runs"
    crashed = stopped_run(root, 1, None)
    signalled = stopped_run(root, 2, 10)  # a stop signal checkpoints the last iteration logged
    killed = stopped_run(root, 3, 8)  # killed two iterations after its checkpoint
    assert run_report(tmp_path / "out", root) == 1  # no finished run to report
    notes = (tmp_path / "out" / "notes.md").read_text()
    progress = "10,240 of 20,480 steps, last write 120 min ago"
    assert f"`{crashed.name}`: stopped early ({progress}): crashed or killed?" in notes
    assert (
        f"`{signalled.name}`: stopped, resumable ({progress}, checkpointed): "
        f"`--resume {signalled}` continues it"
    ) in notes
    assert (
        f"`{killed.name}`: stopped, resumable ({progress}): crashed or killed after its "
        f"checkpoint at 8,192 steps; `--resume {killed}` continues it from there"
    ) in notes
    rows = csv.DictReader((tmp_path / "out" / "runs.csv").open())
    statuses = {row["seed"]: row["status"] for row in rows}
    assert statuses == {"1": "stopped", "2": "resumable", "3": "resumable"}


def test_a_panel_with_no_finished_game_says_so(tmp_path):
    root = tmp_path / "runs"
    for seed in (1, 2):
        make_run(root, "ppo_atari_envpool", "Breakout-v5", seed, [4.0, 6.0])
        make_run(root, "ppo_atari_envpool", "Pong-v5", seed, [])
    out = tmp_path / "out"
    assert run_report(out, root) == 0
    curves = (out / "curves.md").read_text()
    assert "No finished game, so no curve: Pong-v5 (ppo_atari_envpool).\n" in curves
    assert "](curves_ppo_atari_envpool.png)" in curves
    rep = report.Report(
        report.Args(), [report.load_run(p, 10, time.time()) for p in sorted(root.iterdir())], []
    )
    panels = report.plot_set(
        rep, ["ppo_atari_envpool"], ["Breakout-v5", "Pong-v5"], tmp_path / "c.png", False
    )
    assert panels == {"Breakout-v5": None, "Pong-v5": "no finished game"}


def test_ctrl_c_is_one_line_and_exit_code_130(tmp_path):
    """A report stopped while it reads (blocked on an event file that is a named pipe, as on a
    stalled network file system): no traceback, nothing written."""
    run_dir = tmp_path / "runs" / "Breakout-v5__ppo_atari_envpool__1__1700000000"
    run_dir.mkdir(parents=True)
    fifo = run_dir / "events.out.tfevents.1700000000.host"
    os.mkfifo(fifo)
    proc = start_script(["runs", "--output-dir", "out"], tmp_path, module="cleanrl_utils.report")
    writer = None
    try:
        deadline = time.monotonic() + 60
        while writer is None:  # opening the write end succeeds once the report reads the pipe
            assert proc.poll() is None and time.monotonic() < deadline, "never read the pipe"
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        done = finish_script(proc, timeout=30)
    finally:
        if writer is not None:
            os.close(writer)
        if proc.poll() is None:
            proc.kill()
    assert done.returncode == 130, describe(done)
    assert done.stderr == "interrupted (Ctrl-C): nothing written\n", describe(done)
    assert done.stdout == "" and not (tmp_path / "out").exists()


def test_the_default_output_folder_is_ignored_by_git():
    def ignored(path: str) -> bool:
        check = ["git", "-C", str(REPO_ROOT), "check-ignore", "--no-index", "-q", path]
        return subprocess.run(check).returncode == 0

    assert report.Args().output_dir == "report"
    assert ignored("report/report.md") and ignored("report/curves_ppo_atari.png")
    assert not ignored("cleanrl_utils/report/cli.py")  # the package is not an output folder
    assert not ignored("docs/benchmark/report.md")


def test_only_a_corrupt_run_exits_1_with_notes_and_no_traceback(tmp_path):
    root = tmp_path / "runs"
    bad = make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [4.0])
    (event_file,) = bad.glob("events.out.tfevents.*")
    event_file.write_bytes(b"\x00" * 100)
    proc = run_script(
        ["--runs", "runs", "--output-dir", "out"], tmp_path, module="cleanrl_utils.report"
    )
    assert proc.returncode == 1, describe(proc)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "corrupt record at byte 0" in proc.stdout


def test_command_line_takes_the_run_folder_positionally(tmp_path):
    make_run(tmp_path / "my_runs", "ppo_atari_envpool", "Breakout-v5", 1, [4.0, 6.0])
    proc = run_script(["my_runs", "--output-dir", "out"], tmp_path, module="cleanrl_utils.report")
    assert proc.returncode == 0, describe(proc)
    assert ["Breakout-v5", "5.00 ± 0.00"] in table_rows(
        (tmp_path / "out" / "returns.md").read_text()
    )


# ---------------------------------------------------------------------------------------------
# real runs
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_report_on_real_short_runs(tmp_path):
    """Two seeds of the EnvPool script, long enough for a few games of Breakout each."""
    args = ["--num-envs", "2", "--num-steps", "128", "--total-timesteps", "512"]
    procs = [start_script([*args, "--seed", str(seed)], tmp_path) for seed in (1, 2)]
    for proc in procs:
        done = finish_script(proc)
        assert done.returncode == 0, describe(done)
    dirs = run_dirs(tmp_path)
    finals = []
    for run_dir in dirs:
        games = [value for _, value in read_scalars(run_dir).get("charts/episodic_return", [])]
        assert games, f"{run_dir.name} finished no game"
        finals.append(np.mean(games[-100:]))

    proc = run_script(
        ["--runs", "runs", "--output-dir", "report", "--compare-published"],
        tmp_path,
        module="cleanrl_utils.report",
    )
    assert proc.returncode == 0, describe(proc)
    out = tmp_path / "report"
    expected = f"{np.mean(finals):.2f} ± {np.std(finals):.2f}"
    assert ["Breakout-v5", expected] in table_rows((out / "returns.md").read_text())
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert [row["status"] for row in rows] == ["finished", "finished"]
    assert [row["steps"] for row in rows] == ["512", "512"]
    assert all(float(row["runtime_minutes"]) > 0 and float(row["sps"]) > 0 for row in rows)
    assert "Step budgets differ" in (out / "comparison.md").read_text()
    assert (out / "notes.md").read_text() == (  # (the only note: the aggregate skipped)
        "- protocol `published`: no human-normalised aggregate (IQM, median, mean, optimality "
        "gap, profiles, probability of improvement): fewer than `--aggregate-min-games` 5 games "
        "with random and human scores that every script ran (aggregate.md says which)\n"
    )
    import matplotlib.image

    image = matplotlib.image.imread(out / "curves_ppo_atari_envpool.png")
    assert image.shape[:2] == report.plot_size(1)[::-1]


def test_windows_table_is_the_mean_score_of_the_games_ended_in_each_window(tmp_path):
    """`--windows 2048` over 10,240 steps: five windows; make_run spreads the games evenly, so
    seed 1's 9 games (steps 1024, 2048, ... 9216) fall two to a window (one in the last)."""
    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [1.0, 3.0, 5.0, 7.0, 9, 11, 13, 15, 17])
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [4.0])  # one game, at step 5120
    out = tmp_path / "report"
    assert run_report(out, root, extra=("--windows", "2048")) == 0
    text = (out / "windows.md").read_text()
    header, summary_row, seed_1, seed_2 = table_rows(text)
    assert header == ["run", "2,048", "4,096", "6,144", "8,192", "10,240"]
    assert seed_1 == ["seed 1", "2.00", "6.00", "10.00", "14.00", "17.00"]
    assert seed_2 == ["seed 2", "–", "–", "4.00", "–", "–"]
    assert summary_row[0] == "**ppo_atari_envpool** (2 seeds)"
    assert summary_row[3] == "7.00 ± 3.00" and summary_row[1] == "2.00 ± 0.00 (n=1)"
    assert "## Scores per window of steps" in (out / "report.md").read_text()
    assert not (tmp_path / "plain").exists()
    assert run_report(tmp_path / "plain", root) == 0
    assert not (tmp_path / "plain" / "windows.md").exists()  # only with --windows


ENVPOOL_SCRIPTS = [
    "ppo_atari_envpool",
    "ppo_atari_envpool_xla_jax",
    "ppo_atari_envpool_xla_jax_scan",
]


@pytest.mark.parametrize(
    ("labels", "rows"),
    [
        ([f"{name} (mean of 3 seeds)" for name in ENVPOOL_SCRIPTS], 2),  # too wide for one
        (["ppo_atari (mean of 3 seeds)", "ppo_atari_lstm (mean of 3 seeds)"], 1),
    ],
)
def test_the_legend_puts_side_by_side_only_the_names_that_fit_the_figure(labels, rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cleanrl_utils.report.plots import PLOT_DPI, figure_legend, figure_size

    fig, ax = plt.subplots(figsize=figure_size(1), dpi=PLOT_DPI, layout="constrained")
    for label in labels:
        ax.plot([0, 1], [0, 1], label=label)
    legend = figure_legend(fig, *ax.get_legend_handles_labels())
    fig.canvas.draw()  # lays the legend out where the saved PNG has it
    renderer = fig.canvas.get_renderer()
    assert fig.legends == [legend]
    assert legend.get_window_extent(renderer).width <= fig.bbox.width
    texts = [text.get_window_extent(renderer) for text in legend.get_texts()]
    assert [t.get_text() for t in legend.get_texts()] == labels
    assert len({round(box.y0) for box in texts}) == rows
    plt.close(fig)


def test_the_headers_count_the_seeds_that_make_a_cell_in_numeric_order_and_the_curves_say_how_many(
    tmp_path,
):
    """Seeds 2 and 10 finished games, seeds 1 and 3 none: the cell is the mean of two seeds."""
    root = tmp_path / "runs"
    for seed, returns in ((10, [5.0, 7.0]), (2, [1.0, 3.0]), (1, []), (3, [])):
        make_run(root, "ppo_atari_envpool", "Breakout-v5", seed, returns)
    out = tmp_path / "out"
    assert run_report(out, root) == 0
    page = (out / "report.md").read_text()
    assert (
        "4 runs; 1 seed per cell" not in page
        and "4 runs; 2 seeds per cell (seeds 2, 10); 2 runs with no finished game, in no cell; "
        "10,240 env steps per run"
        in page
    ), page
    assert "seeds 1, 2, 3, 10." in page  # the runs reported, numerically
    assert "| Breakout-v5 | 4.00 ± 2.00 |" in page  # 6 and 2: the means of seeds 10 and 2
    names = [row[0] for row in table_rows(page) if row[0].startswith("`Breakout")]
    assert [name.split("__")[2] for name in names] == ["1", "2", "3", "10"]

    rep = report.Report(
        report.Args(), [report.load_run(p, 10, time.time()) for p in sorted(root.iterdir())], []
    )
    from cleanrl_utils.report.plots import seeds_averaged

    assert seeds_averaged(rep, "ppo_atari_envpool", ["Breakout-v5"]) == "mean of 2 seeds"


# ---------------------------------------------------------------------------------------------
# The tools' faults (docs/faults.md, "the tools")


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_exp_names_from_config_json_name_files_only_inside_the_output_folder(tmp_path):
    root = tmp_path / "shared" / "runs"
    escapes = {"../../x": "%2E.+..+x.md", str(tmp_path / "abs"): file_name_of(tmp_path / "abs")}
    for seed, exp_name in enumerate(escapes, 1):
        run = make_run(root, "ppo_atari_envpool", "Breakout-v5", seed, [5.0])
        record = json.loads((run / "config.json").read_text())
        record["args"]["exp_name"] = exp_name
        (run / "config.json").write_text(json.dumps(record))
    before = files_under(tmp_path)
    out = tmp_path / "shared" / "out"
    assert run_report(out, root) == 0
    assert {p for p in files_under(tmp_path) - before if out not in p.parents} == set()
    written = {p.name for p in out.iterdir()}
    assert set(escapes.values()) <= written, written


def file_name_of(path: Path) -> str:
    return "+" + "+".join(path.parts[1:]) + ".md"


def test_a_seed_whose_return_is_nan_is_left_out_with_a_note_naming_it(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [4.0, 6.0])
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [2.0, 8.0])
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 3, [5.0, float("nan")])
    make_run(root, "ppo_atari_envpool", "Pong-v5", 1, [-21.0])
    out = tmp_path / "out"
    assert run_report(out, root) == 0
    rows = table_rows((out / "returns.md").read_text())
    assert ["Breakout-v5", "5.00 ± 0.00"] in rows  # seeds 1 and 2; not `nan ± nan`
    notes = (out / "notes.md").read_text()
    assert (
        "`Breakout-v5__ppo_atari_envpool__3__1700000000`: 1 game of 2 with a NaN or infinite "
        "`charts/episodic_return`: its score is not a number, so it is left out" in notes
    )
    assert "nan" not in (out / "report.md").read_text().replace(
        "Breakout-v5__ppo_atari_envpool__3", ""
    ).lower().replace("a nan or", "")


@pytest.mark.parametrize("where", ["a file", "a folder under a file"])
def test_an_output_folder_that_cannot_take_files_is_one_line_and_exit_code_74(
    tmp_path, capsys, where
):
    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [4.0])
    (tmp_path / "taken").write_text("not a folder")
    out = tmp_path / ("taken" if where == "a file" else "taken/report")
    with pytest.raises(SystemExit) as exit_info:
        run_report(out, root)
    err = capsys.readouterr().err
    assert exit_info.value.code == 74
    assert (
        err
        == f"error: --output-dir {out}: cannot write there: {tmp_path / 'taken'} is a file, not a folder\n"
    )


@pytest.mark.parametrize("link", ["dangling", "a loop", "a folder under a loop"])
def test_an_output_folder_that_is_a_broken_symlink_is_one_line_before_any_run_is_read(
    tmp_path, capsys, link
):
    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [4.0])
    (tmp_path / "to").symlink_to("nowhere" if link == "dangling" else "from")
    (tmp_path / "from").symlink_to("to")
    out = tmp_path / ("to/report" if link == "a folder under a loop" else "to")
    with pytest.raises(SystemExit) as exit_info:
        run_report(out, root)  # (mkdir found `to` taken, after every run was read)
    why = (
        "a symbolic link to nowhere, which does not exist"
        if link == "dangling"
        else "a symbolic link in a loop"
    )
    assert exit_info.value.code == 74
    assert (
        capsys.readouterr().err
        == f"error: --output-dir {out}: cannot write there: {tmp_path / 'to'} is {why}\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["from", "runs", "to"]


def test_a_run_folder_whose_name_is_not_utf8_is_reported_with_its_bytes_written_out(tmp_path):
    root = tmp_path / "runs"
    for seed, config in [(1, True), (2, False)]:  # its exp name from the config.json, the name
        run = make_run(root, "ppo_atari_envpool", "Breakout-v5", seed, [4.0, 6.0], config=config)
        os.rename(run, os.fsencode(run).replace(b"ppo_atari", b"ppo\xff_atari"))
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 3, [4.0, 6.0])
    proc = run_script(["runs", "--output-dir", "out"], tmp_path, module="cleanrl_utils.report")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, describe(proc)
    with (tmp_path / "out" / "runs.csv").open(encoding="utf-8") as f:  # (it ended at the name)
        rows = list(csv.DictReader(f))
    assert sorted((r["run"], r["script"], r["path"]) for r in rows) == [
        (
            "Breakout-v5__ppo\\xff_atari_envpool__2__1700000000",
            "ppo\\xff_atari_envpool",
            "runs/Breakout-v5__ppo\\xff_atari_envpool__2__1700000000",
        ),
        *[
            (name, "ppo_atari_envpool", f"runs/{name.replace('ppo', path)}")
            for name, path in [
                ("Breakout-v5__ppo_atari_envpool__1__1700000000", "ppo\\xff"),
                ("Breakout-v5__ppo_atari_envpool__3__1700000000", "ppo"),
            ]
        ],
    ]
    said = "its folder's name is not UTF-8: written `Breakout-v5__ppo\\xff_atari_envpool__1__1700000000` here"
    assert said in (tmp_path / "out" / "notes.md").read_text() and said in proc.stdout


def test_a_tuner_s_trials_are_drawn_in_one_file_named_after_their_script(tmp_path):
    root = tmp_path / "runs"
    for trial in (2, 10):
        for seed in (1, 2):
            make_run(
                root,
                f"nc-tiny-trial{trial}",
                "Breakout-v5",
                seed,
                [float(trial + seed)],
                record={
                    "command": ["cleanrl/ppo_atari_envpool.py", "--learning-rate=0.001"],
                    "tuner": {"study": "nc-tiny", "trial": trial, "storage": "sqlite:///t.db"},
                },
            )
    out = tmp_path / "out"
    assert run_report(out, root) == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["curves_ppo_atari_envpool.png"]
    header = table_rows((out / "returns.md").read_text())[0]
    assert header == ["env", "nc-tiny-trial2", "nc-tiny-trial10"]  # trials in numeric order
    rep = report.Report(
        report.Args(), [report.load_run(p, 10, time.time()) for p in sorted(root.iterdir())], []
    )
    label = report.plots.script_label(rep, "nc-tiny-trial10", ["Breakout-v5"])
    assert label == "nc-tiny-trial10: tuner study nc-tiny, trial 10 (mean of 2 seeds)"


# ---------------------------------------------------------------------------------------------
# Results a paper accepts: runs grouped by protocol, rliable's aggregates, a selection of runs


MACHADO = {
    "name": "machado",
    "repeat_action_probability": 0.25,
    "full_action_space": True,
    "episodic_life": False,
    "noop_max": 1,
    "max_episode_steps": 27000,
}
GAMES = ["Alien", "Breakout", "Pong"]


def scored_run(root: Path, script: str, game: str, seed: int, hns: float, **kwargs) -> float:
    """A run of two games that score `hns` human-normalised on `game`'s `-v5` id; returns its
    human-normalised score as the report reads it back (the event file keeps float32)."""
    random, human = report.load_human_random()[game]
    final = float(np.float32(random + hns * (human - random)))
    make_run(root, script, f"{game}-v5", seed, [final] * 2, **kwargs)
    return (final - random) / (human - random)


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    """Under the published protocol (runs made before runs recorded one): two scripts on three
    games, `variant` with a third seed on Pong and `ppo_atari_envpool` with a fourth game; the
    same script under Machado et al.'s protocol (recorded), scoring near random, with the same
    seed; one run with another time limit and no protocol recorded (custom). Aggregates from
    three games on."""
    root = tmp_path_factory.mktemp("paper") / "runs"
    scores: dict[tuple[str, str], dict[str, list[float]]] = {}

    def add(protocol, script, game, seed, hns, **kwargs):
        score = scored_run(root, script, game, seed, hns, **kwargs)
        scores.setdefault((protocol, script), {}).setdefault(game, []).append(score)

    for i, game in enumerate(GAMES):
        for seed in (1, 2):
            add("published", "ppo_atari_envpool", game, seed, 0.4 * i + 0.1 * seed)
            add("published", "variant", game, seed, 0.6 * i + 0.05 * seed + 0.02)
        machado = {"started": 1700000100, "record": {"protocol": MACHADO}}
        add("machado", "ppo_atari_envpool", game, 1, 0.01 * i - 0.01, **machado)
    add("published", "variant", "Pong", 3, 0.7)
    scored_run(root, "ppo_atari_envpool", "Asterix", 1, 3.0)
    custom = root.parent / "custom"
    run = make_run(custom, "ppo_atari_envpool", "Breakout-v5", 1, [7.0], started=1700000200)
    record = json.loads((run / "config.json").read_text())
    record["args"]["max_episode_steps"] = 27000
    (run / "config.json").write_text(json.dumps(record))
    out = root.parent / "out"
    flags = ("--compare-published", "--aggregate-min-games", "3")
    assert run_report(out, root, custom, extra=flags) == 0
    return out, scores


def test_runs_of_two_protocols_are_never_mixed(paper):
    """The same script, env ids and seeds under two protocols: two tables, two curves files,
    two aggregates, no seed taken for a repeat of the other's; the comparison with the
    published numbers takes only the published protocol's runs."""
    out, _ = paper
    returns = (out / "returns.md").read_text()
    assert "### ppo_atari_envpool, variant (protocol `published`)" in returns
    assert "### ppo_atari_envpool (protocol `machado`)" in returns
    assert "### ppo_atari_envpool (protocol `custom`)" in returns
    tables = returns.split("### ")[1:]
    rows = {table.split("\n")[0]: table_rows(table) for table in tables}
    machado = rows["ppo_atari_envpool (protocol `machado`)"]
    assert [row[0] for row in machado[1:]] == [f"{game}-v5" for game in GAMES]
    assert not any("(n=" in cell for row in machado for cell in row)
    assert ["Breakout-v5", "7.00 ± 0.00"] in rows["ppo_atari_envpool (protocol `custom`)"]
    page = (out / "report.md").read_text()
    assert "counted once" not in page  # no machado seed taken for a repeat of a published one
    assert (
        "Protocols found: `published`: 14 runs reported; `machado`: 3 runs reported; "
        "`custom` (max_episode_steps 27000): 1 run reported. Each protocol has tables, "
        "curves, aggregates and comparisons of its own: runs of two protocols are never put in "
        "one of them." in page
    )
    assert "**Protocol**: `published`, `machado`, `custom` (each reported on its own" in page
    assert sorted(p.name for p in out.glob("curves_*.png")) == [
        "curves_ppo_atari_envpool+variant.png",
        "curves_ppo_atari_envpool_custom.png",
        "curves_ppo_atari_envpool_machado.png",
    ]
    comparison = (out / "comparison.md").read_text()
    assert "not compared: the runs of `machado`, `custom`" in comparison
    compared = [row for row in table_rows(comparison) if len(row) == 10 and row[0] != "env"]
    assert [row[0] for row in compared] == ["Breakout-v5", "Pong-v5"]
    published_rows = rows["ppo_atari_envpool, variant (protocol `published`)"]
    for row in compared:  # ours: the published protocol's cell, not a mix with Machado's
        assert [row[0], f"{row[2]} (n=2)"] in [r[:2] for r in published_rows]
    protocols = {r["run"]: r["protocol"] for r in csv.DictReader((out / "runs.csv").open())}
    assert sorted(protocols.values()).count("machado") == 3
    assert protocols["Breakout-v5__ppo_atari_envpool__1__1700000200"] == "custom"


def interval(value) -> str:
    point, low, high = value
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def test_the_aggregates_are_rliables_set_over_the_games_every_script_ran(paper):
    """Per protocol, over the three games both scripts ran (Asterix, which one did not, is left
    out and said so): rliable's four statistics, the profile and the probability of
    improvement, each the estimate of `report.estimates` on the scores of the runs (2000
    resamples, seed 0), and their figures."""
    out, scores = paper
    text = (out / "aggregate.md").read_text()
    published, machado = text.split("### Protocol `published`")[1].split("### Protocol `machado`")
    machado, custom = machado.split("### Protocol `custom`")
    boot = (2000, 0.95, 0)
    by_game = {
        s: [np.array(scores["published", s][g]) for g in GAMES]
        for s in ("ppo_atari_envpool", "variant")
    }
    rows = table_rows(published)
    assert rows[0] == ["script", "games", "runs", "median", "IQM", "mean", "optimality gap"]
    for script, runs in (("ppo_atari_envpool", "6"), ("variant", "7")):
        estimates = report.interval_estimates(by_game[script], *boot)
        expected = [interval(estimates[m]) for m in ("median", "iqm", "mean", "optimality_gap")]
        assert [script, "3", runs, *expected] in rows
    assert (
        "ppo_atari_envpool: 1 game not every script ran, left out of the aggregates: Asterix"
        in published
    )
    point, low, high = report.performance_profile(by_game["variant"], [0.5, 1.0], *boot)
    profile = [row for row in rows if row[0] == "variant" and len(row) == 5]  # τ = 0 ... 1
    assert profile[0][3:5] == [interval((point[i], low[i], high[i])) for i in range(2)]
    # each pair's bootstrap runs once, the scripts in name order; P(Y > X) = 1 - P(X > Y)
    worse = report.probability_of_improvement(
        by_game["ppo_atari_envpool"], by_game["variant"], *boot
    )
    better = (1 - worse[0], 1 - worse[2], 1 - worse[1])
    assert ["**variant**", interval(better), "–"] in rows
    assert ["**ppo_atari_envpool**", "–", interval(worse)] in rows
    machado_scores = [np.array(scores["machado", "ppo_atari_envpool"][g]) for g in GAMES]
    estimates = report.interval_estimates(machado_scores, *boot)
    assert ["ppo_atari_envpool", "3", "3", interval(estimates["median"])] == table_rows(machado)[1][
        :4
    ]
    assert "1 game with known scores, fewer than `--aggregate-min-games` 3" in custom
    width = "ppo_atari_envpool: one seed a game, so its intervals have no width"
    assert width in machado and "one seed a game" not in published  # (`variant`: 2 to 3 seeds)
    import matplotlib.image

    for name in ("estimates", "profiles", "improvement", "estimates_machado", "profiles_machado"):
        assert f"]({name}.png)" in text
        image = matplotlib.image.imread(out / f"{name}.png")
        assert image.shape[1] == 1400 and image[..., :3].std() > 0.05, name
    assert not (out / "improvement_machado.png").exists()  # one script: nothing to compare


def test_the_figures_name_their_protocol_axes_and_counts(paper, tmp_path):
    from cleanrl_utils.report.aggregate import compute
    from cleanrl_utils.report.figures import estimates_figure, improvement_figure, profiles_figure

    out, _ = paper
    runs = [report.load_run(p, 10, time.time()) for p in sorted((out.parent / "runs").iterdir())]
    bench = report.Benchmark(report.Args(bootstrap_samples=100, aggregate_min_games=3), runs, [])
    agg, _ = compute(bench.parts[0])
    counts = "3 games, ppo_atari_envpool: 6 runs (2 seeds a game); variant: 7 runs (2 to 3 seeds a game)."
    score = "human-normalised score"
    for make, title, xlabels in (
        (estimates_figure, "Interval estimates, protocol: published", [score] * 4),
        (
            profiles_figure,
            "Performance profiles, protocol: published",
            [f"{score} τ", f"{score} τ (log scale)"],
        ),
        (
            improvement_figure,
            "Probability of improvement, protocol: published",
            ["P(X > Y): probability that a run of X scores above a run of Y", ""],
        ),
    ):
        fig = make(agg)
        heading = fig.legends[0].get_title() if fig.legends else fig._suptitle
        assert heading.get_text() == title
        assert fig._supxlabel.get_text().startswith(counts)
        assert "95% stratified bootstrap intervals (100 resamples" in fig._supxlabel.get_text()
        assert [ax.get_xlabel() for ax in fig.axes] == xlabels  # (the twin: the same axis)
        fig.clf()
    fig = profiles_figure(agg)
    assert [ax.get_xscale() for ax in fig.axes] == ["linear", "log"]
    assert fig.axes[0].get_ylabel() == "fraction of runs with score > τ"


def test_learning_curves_say_what_their_band_is_and_mark_few_games_and_differing_steps(tmp_path):
    from cleanrl_utils.report.plots import curves_figure, panel_marks
    from cleanrl_utils.report.stats import curve_band, curve_values

    root = tmp_path / "runs"
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [float(g) for g in range(20)])
    make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [3.0], total_steps=20480)  # one game
    for seed in (1, 2):
        make_run(root, "ppo_atari_envpool", "Pong-v5", seed, [float(seed + g) for g in range(12)])
    runs = [report.load_run(p, 10, time.time()) for p in sorted(root.iterdir())]
    rep = report.Report(report.Args(), runs, [])
    script = ["ppo_atari_envpool"]
    assert panel_marks(rep, script, "Breakout-v5") == [
        "dashed, fewest games of a seed:\nppo_atari_envpool 1",
        "steps differ: 10,240 / 20,480",
    ]
    assert panel_marks(rep, script, "Pong-v5") == []
    fig, _ = curves_figure(rep, script, ["Breakout-v5", "Pong-v5"], wall_clock=False)
    breakout, pong = fig.axes[:2]
    assert [line.get_linestyle() for line in breakout.get_lines()] == ["--"]
    assert [line.get_linestyle() for line in pong.get_lines()] == ["-"]
    # what a panel says goes under its title, never in a box over the curves
    assert len(breakout.texts) == 0 and breakout.get_title() == "\n".join(
        ["Breakout-v5", *panel_marks(rep, script, "Breakout-v5")]
    )
    assert fig.legends[0].get_title().get_text() == "Learning curves, protocol: published"
    caption = fig._supxlabel.get_text()
    assert (
        "band: ± one standard deviation over seeds" in caption
        and "Dashed: a seed with fewer than 10" in caption
    )
    fig.clf()

    ci = report.Report(report.Args(curve_band="ci", bootstrap_samples=300), runs, [])
    fig, _ = curves_figure(ci, script, ["Pong-v5"], wall_clock=False)
    assert (
        "band: 95% percentile bootstrap interval of that mean (300 resamples of the seeds)"
        in fig._supxlabel.get_text()
    )
    (band,) = fig.axes[0].collections
    fig.clf()
    x, values = curve_values(ci.cells["ppo_atari_envpool", "Pong-v5"].runs, 100, 200, False)
    index = np.random.RandomState(0).randint(0, 2, size=(300, 2))
    low, high = np.percentile(values[index].mean(axis=1), [2.5, 97.5], axis=0)
    assert np.allclose(curve_band(values, "ci", 300, 0.95, 0), (low, high))
    assert np.allclose(band.get_paths()[0].vertices[:, 1].min(), low.min())
    assert np.allclose(band.get_paths()[0].vertices[:, 1].max(), high.max())


def test_the_protocol_of_a_run_made_before_runs_recorded_it():
    assert report.read_protocol({"args": {"exp_name": "x"}}) == {"name": "published"}
    assert report.read_protocol({"args": {"max_episode_steps": 108000}}) == {"name": "published"}
    assert report.read_protocol(None) == {"name": "published"}
    assert report.read_protocol({"args": {"max_episode_steps": 27000}}) == {
        "name": "custom",
        "max_episode_steps": 27000,
    }
    assert report.read_protocol({"protocol": MACHADO, "args": {}}) == MACHADO


def test_the_selection_flags_report_one_sweep_and_nothing_else(tmp_path, capsys):
    root = tmp_path / "runs"
    sweep = [
        make_run(root, "ppo_atari_envpool", "Breakout-v5", 1, [4.0], record={"sweep": "s-1"}),
        make_run(root, "ppo_atari_envpool", "Pong-v5", 1, [6.0], record={"sweep": "s-1"}),
    ]
    later = make_run(root, "ppo_atari_envpool", "Breakout-v5", 2, [100.0], record={"sweep": "s-2"})
    older = make_run(root, "my_variant", "Breakout-v5", 1, [50.0], started=1600000000)

    def reported(*flags: str) -> set[str]:
        out = tmp_path / "out"
        shutil.rmtree(out, ignore_errors=True)
        assert run_report(out, root, extra=flags) == 0
        return {row["run"] for row in csv.DictReader((out / "runs.csv").open())}

    assert reported("--sweep", "s-1") == {run.name for run in sweep}
    assert ["Breakout-v5", "4.00 ± 0.00"] in table_rows(
        (tmp_path / "out" / "returns.md").read_text()
    )
    notes = (tmp_path / "out" / "notes.md").read_text()
    assert "`--sweep s-1` selected 2 of the 4 runs found" in notes
    assert reported("--exp-name", "my_variant") == {older.name}
    both = reported("--env-id", "Breakout-v5", "--exp-name", "ppo_atari_envpool", "my_variant")
    assert both == {sweep[0].name, later.name, older.name}
    assert reported("--since", "2023-11-14") == {run.name for run in [*sweep, later]}
    capsys.readouterr()
    err = expect_usage_error(
        ["--runs", str(root), "--output-dir", str(tmp_path / "no"), "--sweep", "s-3"], capsys
    )
    assert err == (
        "error: --sweep s-3: no run of that sweep; the sweeps found: s-1 (ppo_atari_envpool; "
        "2023-11-14; 2 runs); s-2 (ppo_atari_envpool; 2023-11-14; 1 run)\n"
    )
    err = expect_usage_error(
        ["--runs", str(root), "--output-dir", str(tmp_path / "no"), "--since", "2023-13-01"], capsys
    )
    assert err == "error: --since: `2023-13-01` is not a day (YYYY-MM-DD)\n"
    assert not (tmp_path / "no").exists()
