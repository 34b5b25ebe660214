"""The report as a paper takes it: runs of other arguments are variants, never seeds of one; the
selection flags; skipped and lowered aggregates said; figures in PDF and SVG, one colour per
method from its label; `--label` in every output; and the paper kit (evaluation.md, aggregate.tex,
references.bib, the tables of arguments and software) with the numbers of aggregate.md. Real
event files, written as the scripts write them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from report_testing import expect_usage_error, make_run, run_report, table_rows

from cleanrl_utils.report.style import PALETTE, colors_of, preferred_color

GAMES = ["Alien", "Breakout", "MsPacman", "Pong", "Qbert"]
MACHADO = {
    "name": "machado",
    "repeat_action_probability": 0.25,
    "full_action_space": True,
    "episodic_life": False,
    "noop_max": 0,
    "max_episode_steps": 27000,
}
BASE = "ppo_atari_envpool (learning_rate=0.00025, num_envs=8)"
HIGH = "ppo_atari_envpool (learning_rate=0.001, num_envs=8)"
ADHOC = "ppo_atari_envpool (learning_rate=0.00025, num_envs=4)"


def lr_run(root: Path, game: str, seed: int, lr: float, sweep, started: int, **args) -> Path:
    """A run of `ppo_atari_envpool` under Machado's protocol whose returns are 10 x seed (lr
    2.5e-4) or 100 x seed (lr 1e-3), 20 games each, with its arguments recorded as a script
    records them."""
    level = (10.0 if lr < 5e-4 else 100.0) * seed + args.pop("offset", 0.0)
    record = {
        "sweep": sweep,
        "protocol": MACHADO,
        "packages": {"torch": args.pop("torch", "2.13.0"), "numpy": "2.3.0"},
        "python": "3.11.7",
        "device": {"framework": "torch", "type": "cpu", "name": "test CPU"},
    }
    run = make_run(root, "ppo_atari_envpool", f"{game}-v5", seed, [level] * 20, started=started)
    config = json.loads((run / "config.json").read_text())
    config.update(record)
    config["args"].update(
        {"learning_rate": lr, "num_envs": 8, "num_steps": 128, "track": False, **args}
    )
    (run / "config.json").write_text(json.dumps(config))
    return run


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """The baseline's sweep (lr 2.5e-4, seeds 1-3 on five games), then the learning-rate variant
    launched the natural way: the same command with `--learning-rate 1e-3`, the same exp name,
    later; then one ad-hoc run of seed 3 on Breakout with other `--num-envs`, newest of all."""
    root = tmp_path_factory.mktemp("paper") / "runs"
    for game in GAMES:
        for seed in (1, 2, 3):
            lr_run(root, game, seed, 2.5e-4, "base", 1700000000 + seed)
            lr_run(root, game, seed, 1e-3, "high", 1700100000 + seed)
    lr_run(root, "Breakout", 3, 2.5e-4, None, 1700200000, num_envs=4, offset=-25.0)
    out = root.parent / "out"
    flags = ("--figure-format", "png,pdf,svg", "--bootstrap-samples", "200")
    assert run_report(out, root, extra=flags) == 0
    return root, out


def test_runs_with_other_arguments_are_variants_never_seeds_of_one(sweeps):
    _, out = sweeps
    rows = table_rows((out / "returns.md").read_text())
    header = rows[0]
    assert header == ["env", ADHOC, BASE, HIGH]
    breakout = rows[header and [r[0] for r in rows].index("Breakout-v5")]
    # each column the mean of its own seeds: 10, 20, 30 and 100, 200, 300, the ad-hoc run apart
    assert breakout[1:] == ["5.00 ± 0.00 (n=1)", "20.00 ± 8.16", "200.00 ± 81.65"]
    notes = (out / "notes.md").read_text()
    assert (
        "`ppo_atari_envpool`: its runs were made with different arguments, so they are 3 "
        f"variants, each reported on its own and never as seeds of one: `{ADHOC}` (1 run), "
        f"`{BASE}` (15 runs), `{HIGH}` (15 runs)"
    ) in notes
    assert "counted once" not in notes  # no seed taken for a rerun of another
    variants = table_rows((out / "report.md").read_text().split("What differs")[1])
    assert ["`learning_rate`", "0.00025", "0.00025", "0.001"] in variants
    assert ["`num_envs`", "4", "8", "8"] in variants


def test_a_rerun_with_equal_arguments_is_one_seed_and_a_stopped_one_never_replaces_a_finished_one(
    tmp_path,
):
    root = tmp_path / "runs"
    lr_run(root, "Pong", 1, 2.5e-4, None, 1700000000)
    lr_run(root, "Pong", 1, 2.5e-4, None, 1700000500, offset=5.0)  # run again: same arguments
    stopped = make_run(root, "ppo_atari_envpool", "Pong-v5", 1, [99.0], started=1700000900)
    config = json.loads((stopped / "config.json").read_text())
    config["args"].update(learning_rate=2.5e-4, num_envs=8, num_steps=128)
    config["args"]["total_timesteps"] = 10240  # (its budget: the same experiment)
    config["args"]["num_iterations"] = 20  # stopped at half of it
    config["stopped"] = {"global_step": 10240, "signal": "SIGTERM"}
    config["protocol"] = MACHADO
    (stopped / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    assert run_report(out, root, extra=("--include-unfinished",)) == 0
    rows = table_rows((out / "returns.md").read_text())
    assert ["Pong-v5", "15.00 ± 0.00"] in rows  # the newest finished run, not the stopped one
    notes = (out / "notes.md").read_text()
    assert "3 runs with seed 1 and the same arguments, counted once: the newest finished run" in (
        notes
    )


def test_sweeps_are_selected_together_and_a_wrong_value_is_one_line_that_lists_what_exists(
    sweeps, tmp_path, capsys
):
    root, _ = sweeps
    out = tmp_path / "both"
    assert run_report(out, root, extra=("--sweep", "base", "high")) == 0
    assert table_rows((out / "returns.md").read_text())[0] == [
        "env",
        "ppo_atari_envpool (learning_rate=0.00025)",
        "ppo_atari_envpool (learning_rate=0.001)",
    ]
    no = str(tmp_path / "no")
    capsys.readouterr()
    err = expect_usage_error(["--runs", str(root), "--output-dir", no, "--sweep", "bse"], capsys)
    assert err == (
        "error: --sweep bse: no run of that sweep; the sweeps found: base (ppo_atari_envpool; "
        "2023-11-14; 15 runs); high (ppo_atari_envpool; 2023-11-16; 15 runs)\n"
    )
    err = expect_usage_error(
        ["--runs", str(root), "--output-dir", no, "--env-id", "Breakout"], capsys
    )
    assert err == "error: --env-id Breakout: no run on that env id; did you mean Breakout-v5?\n"
    err = expect_usage_error(["--runs", str(root), "--output-dir", no, "--exp-name"], capsys)
    assert err == "error: --exp-name needs a value (given with none, it would select nothing)\n"
    err = expect_usage_error(
        ["--runs", str(root), "--output-dir", no, "--label", "ppo=PPO"], capsys
    )
    assert err.startswith("error: --label ppo=PPO: `ppo` is no exp name or variant of the runs")
    err = expect_usage_error(
        ["--runs", str(root), "--output-dir", no, "--figure-format", "png,gif"], capsys
    )
    assert err == "error: --figure-format png,gif: unknown format gif (known: png, pdf, svg)\n"
    assert not Path(no).exists()


def svg_text(path: Path) -> str:
    """The text of an SVG's text elements, joined (the report keeps text as text)."""
    return " ".join(re.findall(r"<text[^>]*>([^<]*)</text>", path.read_text()))


def colours(path: Path) -> set[str]:
    """The palette colours an SVG draws with."""
    return set(re.findall(r"(?:fill|stroke): (#[0-9a-f]{6})", path.read_text())) & set(PALETTE)


def test_figures_in_every_format_with_one_colour_per_method_taken_from_its_label(sweeps, tmp_path):
    root, out = sweeps
    stems = ["curves_ppo_atari_envpool_machado", "estimates_machado", "profiles_machado"]
    stems.append("improvement_machado")
    for stem in stems:
        for fmt in ("png", "pdf", "svg"):
            assert (out / f"{stem}.{fmt}").stat().st_size > 1000, f"{stem}.{fmt}"
    assert (out / "estimates_machado.pdf").read_bytes().startswith(b"%PDF")
    expected = colors_of([BASE, ADHOC, HIGH])
    assert len(set(expected.values())) == 3
    # every method in its colour, in every figure (the ad-hoc run, one game, has no aggregate)
    assert colours(out / f"{stems[0]}.svg") == set(expected.values())
    for stem in stems[1:3]:
        assert colours(out / f"{stem}.svg") == {expected[BASE], expected[HIGH]}, stem
    # another report, of the variant alone under its own label: the same colour for it
    label = "ppo_atari_envpool=Ours"  # (alone in its report, the variant is its exp name)
    other = tmp_path / "other"
    assert (
        run_report(
            other, root, extra=("--sweep", "high", "--label", label, "--figure-format", "svg")
        )
        == 0
    )
    ours = colors_of(["Ours"])["Ours"]
    assert ours == PALETTE[preferred_color("Ours")]
    for stem in ("curves_Ours_machado", "estimates_machado"):
        assert colours(other / f"{stem}.svg") == {ours}
    assert "Ours" in svg_text(other / "estimates_machado.svg")
    assert not list(other.glob("*.png"))


def test_a_label_names_the_method_in_every_table_figure_paragraph_and_latex_table(sweeps, tmp_path):
    root, _ = sweeps
    out = tmp_path / "labelled"
    flags = (
        "--sweep",
        "base",
        "high",
        "--label",
        "ppo_atari_envpool=PPO",
        "--figure-format",
        "svg",
    )
    assert run_report(out, root, extra=(*flags, "--bootstrap-samples", "200")) == 0
    high = "PPO (learning_rate=0.001)"
    assert high in table_rows((out / "returns.md").read_text())[0]
    for name in ("curves_ppo_atari_envpool_machado.svg", "estimates_machado.svg"):
        assert high in svg_text(out / name), name
    assert f"{high} reaches an IQM of" in (out / "evaluation.md").read_text()
    assert "PPO (learning\\_rate=0.001) &" in (out / "aggregate.tex").read_text()
    assert "ppo_atari_envpool (" not in (out / "aggregate.md").read_text()


def intervals(markdown: str) -> dict[str, list[str]]:
    """aggregate.md's estimates table: method -> [median, IQM, mean, optimality gap]."""
    rows = table_rows(markdown)
    start = rows.index(["script", "games", "runs", "median", "IQM", "mean", "optimality gap"])
    return {row[0]: row[3:] for row in rows[start + 1 :] if len(row) == 7}


def test_the_paper_kit_has_the_numbers_of_aggregate_md(sweeps):
    _, out = sweeps
    aggregate = (out / "aggregate.md").read_text()
    estimates = intervals(aggregate)
    assert sorted(estimates) == [BASE, HIGH]  # (the ad-hoc run has one game: left out)
    paragraph = (out / "evaluation.md").read_text()
    latex = (out / "aggregate.tex").read_text()
    for method, (median, iqm, mean, gap) in estimates.items():
        assert (
            f"{method} reaches an IQM of {iqm} (median {median}, mean {mean}, optimality gap {gap}"
            in paragraph
        )
        escaped = method.replace("_", "\\_")
        assert f"{escaped} & {median} & {iqm} & {mean} & {gap} \\\\" in latex
    improvement = table_rows(aggregate.split("Probability of improvement P(X > Y)")[1])
    columns = improvement[0][1:]
    table = {(r[0].strip("*"), y): v for r in improvement[1:] for y, v in zip(columns, r[1:])}
    said = re.findall(
        r"a run of (.+?) scores above a run of (.+?) on a game is ([^(]+) \(", paragraph
    )
    assert len(said) == 2  # one pair, in markdown and in LaTeX
    x, y, value = said[0]
    assert (x, y) == (HIGH, BASE) and value == table[HIGH, BASE]  # said of the better one
    assert float(value.split()[0]) > 0.5
    assert (
        "under the protocol of Machado et al. (2018): sticky actions with probability 0.25, the "
        "full action set of 18 actions, no loss-of-life signal, no no-op starts and games cut at "
        "27,000 agent steps (108,000 frames)" in paragraph
    )
    assert (
        "the score of a run is the mean return of all its training games (20 games a run: fewer "
        "than 100)" in paragraph
    )
    assert "\\citet{machado2018revisiting}" in paragraph and "\\citep{agarwal2021deep}" in paragraph
    for table in ("tab:aggregates-machado", "tab:improvement-machado", "tab:returns-machado"):
        assert f"\\label{{{table}}}" in latex
    assert latex.count("\\toprule") == 3 and "$20.00 \\pm 8.16$" in latex
    bib = (out / "references.bib").read_text()
    keys = re.findall(r"^@\w+\{([^,]+),", bib, re.M)
    assert keys == [
        "machado2018revisiting",
        "bellemare2013arcade",
        "agarwal2021deep",
        "badia2020agent57",
        "schulman2017proximal",
        "huang2022cleanrl",
    ]
    page = (out / "report.md").read_text()
    assert "## The evaluation paragraph" in page and "## Software and devices" in page
    assert ["torch", "2.13.0", ""] in table_rows(page.split("## Software and devices")[1])


def test_skipped_and_lowered_aggregates_are_said_and_the_score_is_said_as_it_is(tmp_path, capsys):
    root = tmp_path / "runs"
    for game in GAMES[:3]:
        lr_run(root, game, 1, 2.5e-4, None, 1700000000)
    lr_run(root, "Alien", 2, 2.5e-4, None, 1700000000, torch="2.14.1")
    out = tmp_path / "out"
    capsys.readouterr()
    assert run_report(out, root, extra=("--figure-format", "svg")) == 0
    said = (
        "protocol `machado`: no human-normalised aggregate (IQM, median, mean, optimality gap, "
        "profiles, probability of improvement): fewer than `--aggregate-min-games` 5 games"
    )
    assert said in capsys.readouterr().out
    assert said in (out / "notes.md").read_text()
    # one seed a curve: the caption draws and names no band
    caption = svg_text(out / "curves_ppo_atari_envpool_machado.svg")
    assert "one seed a curve, so no band" in caption or "none where a curve has one seed" in caption
    assert "the mean of its last 20 games (all its games: fewer than --last-n 100)" in caption
    assert (
        "we report each game's mean and standard deviation over seeds"
        in (out / "evaluation.md").read_text()
    )
    software = table_rows((out / "report.md").read_text().split("## Software and devices")[1])
    assert ["torch", "2.13.0 (3 runs); 2.14.1 (1 run)", "**differs**"] in software

    lowered = tmp_path / "lowered"
    assert (
        run_report(lowered, root, extra=("--aggregate-min-games", "3", "--figure-format", "svg"))
        == 0
    )
    text = "`--aggregate-min-games 3`, below the default 5"
    assert text in (lowered / "aggregate.md").read_text()
    assert text.replace("`", "") in svg_text(lowered / "estimates_machado.svg")
    assert (
        "(Aggregates over 3 games: fewer than the usual 5.)"
        in (lowered / "evaluation.md").read_text()
    )
    shutil.rmtree(lowered)


def test_a_run_below_its_budget_is_marked_in_the_legend(tmp_path):
    root = tmp_path / "runs"
    lr_run(root, "Pong", 1, 2.5e-4, None, 1700000000)
    stopped = lr_run(root, "Pong", 2, 2.5e-4, None, 1700000000)
    config = json.loads((stopped / "config.json").read_text())
    config["stopped"] = {"global_step": 10240, "signal": "SIGTERM"}
    config["args"]["num_iterations"] = 20
    config["args"]["total_timesteps"] = 10240  # (the same experiment as seed 1's)
    (stopped / "config.json").write_text(json.dumps(config))
    out = tmp_path / "out"
    flags = ("--include-unfinished", "--figure-format", "svg")
    assert run_report(out, root, extra=flags) == 0
    text = svg_text(out / "curves_ppo_atari_envpool_machado.svg")
    assert "ppo_atari_envpool (mean of 2 seeds; 1 unfinished)" in text


def test_the_report_estimates_the_57_game_median_from_atari5_as_a_hand_computation(
    tmp_path, capsys
):
    """Atari-5's five games, two seeds each: the report's estimate is the model applied by hand
    (the fit's random and human scores, each game's mean over seeds, below random clipped), in
    aggregate.md, the paragraph, the LaTeX table and the console; a method with four of the five
    games gets no estimate and a note naming the fifth."""
    import csv

    from cleanrl_utils.report.atari5 import COEFFICIENTS, FIT_SCORES

    lines = [line for line in FIT_SCORES.read_text().splitlines() if not line.startswith("#")]
    fit = {row["game"]: row for row in csv.DictReader(lines)}
    root = tmp_path / "runs"
    returns = {
        "BattleZone": (3000.0, 5000.0),
        "DoubleDunk": (-20.0, -19.0),  # below random: clipped to 0
        "NameThisGame": (3000.0, 3500.0),
        "Phoenix": (1500.0, 1700.0),
        "Qbert": (600.0, 800.0),
    }
    y = 0.0
    for game, seeds in returns.items():
        for seed, value in enumerate(seeds, 1):
            make_run(root, "ppo_atari_envpool", f"{game}-v5", seed, [value] * 3)
            if game != "Qbert":
                make_run(root, "short", f"{game}-v5", seed, [value] * 3)
        random, human = float(fit[game]["random"]), float(fit[game]["human"])
        hns = (np.mean(seeds) - random) / (human - random)
        y += COEFFICIENTS["atari5"][game] * np.log10(1 + max(100 * hns, 0.0))
    by_hand = f"{10**y - 1:.1f}%"
    out = tmp_path / "out"
    capsys.readouterr()
    assert run_report(out, root, extra=("--bootstrap-samples", "200")) == 0
    console = capsys.readouterr().out
    assert f"ppo_atari_envpool: the 57-game median estimated by Atari-5: {by_hand} [" in console
    rows = table_rows((out / "aggregate.md").read_text().split("estimated from a few games")[1])
    (row,) = [r for r in rows if r[0] == "ppo_atari_envpool"]
    assert row[1] == "Atari-5" and row[2].startswith(f"{by_hand} [") and row[3] == "± 10.4%"
    assert "at small budgets it is an extrapolation" in (out / "aggregate.md").read_text()
    assert f"ppo_atari_envpool {row[2]} by Atari-5" in (out / "evaluation.md").read_text()
    point = by_hand.rstrip("%")
    assert f"ppo\\_atari\\_envpool & Atari-5 & {point} [" in (out / "aggregate.tex").read_text()
    assert "aitchison2023atari5" in (out / "references.bib").read_text()
    assert (
        "short: no Atari-5 estimate of the 57-game median: it lacks Qbert (it ran 4 of the set's "
        "5 games)" in (out / "notes.md").read_text()
    )
    assert (out / "atari5.png").exists()
