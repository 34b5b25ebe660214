"""The report tool's flags (`python -m cleanrl_utils.report --help`); docs/report.md lists them
from the docstrings below."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_RUNS = ("runs",)  # the folder read when none is named


@dataclass
class Args:
    runs: tuple[str, ...] = ()
    """run folders, or folders searched (recursively) for run folders: any folder that holds a TensorBoard event file or a `config.json`; also taken without `--runs` (`python -m cleanrl_utils.report runs/`); none named: `runs`"""
    sweep: tuple[str, ...] = ()
    """report only the runs of these sweeps (`--sweep A B`): the id the launcher or the tuner records in each run's `config.json` (`"sweep"`) and prints, in the report command for exactly its runs, when it ends"""
    exp_name: tuple[str, ...] = ()
    """report only the runs of these exp names (`--exp-name ppo_atari_envpool my_variant`)"""
    env_id: tuple[str, ...] = ()
    """report only the runs on these env ids, as the runs were given them (`--env-id Breakout-v5 Pong-v5`)"""
    since: str | None = None
    """report only the runs started on or after this day, `YYYY-MM-DD` (UTC; the start time in the run's name, else in its `config.json`)"""
    output_dir: str = "report"
    """where the markdown files, the PNGs and `runs.csv` are written (created if needed)"""
    label: tuple[str, ...] = ()
    """`NAME=TEXT` (repeatable: `--label ppo_atari_envpool=PPO --label my_exp=Ours`): the name of an exp name or of a variant (`ppo_atari_envpool (learning_rate=0.001)=PPO, high lr`) in every table, figure, paragraph and LaTeX table"""
    figure_format: str = "png"
    """the formats of every figure, comma-separated: any of `png`, `pdf`, `svg` (`--figure-format png,pdf,svg`); the markdown shows the first"""
    title: str = "Benchmark report"
    """the heading of `report.md`"""
    hardware: str = ""
    """the machine the runs ran on, printed at the top of the report (the event files do not record it)"""
    notes: tuple[str, ...] = ()
    """extra paragraphs printed at the top of the report, after the summary of what was read"""
    last_n: int = 100
    """a run's final return is the mean of its last `last_n` games (fewer when it has fewer); the curves use the same running mean"""
    include_unfinished: bool = False
    """also report runs that have not reached their step budget (still running or stopped early); they are always listed in the notes"""
    running_minutes: float = 10.0
    """an unfinished run whose event file changed less than this many minutes ago is reported as still running, an older one as stopped early"""
    wall_clock: bool = False
    """also plot the learning curves against wall-clock time (`curves_*_wallclock.png`)"""
    curve_points: int = 200
    """the number of points on each curve's x-axis"""
    curve_band: Literal["std", "ci"] = "std"
    """the band around each learning curve: `std`, one standard deviation over seeds on each side; `ci`, the `--confidence` percentile bootstrap interval of the mean over seeds (`--bootstrap-samples`, `--bootstrap-seed`)"""
    curve_min_games: int = 10
    """a learning curve with a seed that finished fewer games than this is drawn dashed, and its panel says so: a running mean of a few games is no learning curve"""
    windows: int = 0
    """also write `windows.md`: the mean score of the games that ended in each window of this many env steps, per run and as mean ± std over seeds (0: no such table)"""
    compare_published: bool = False
    """compare with the published CleanRL numbers (`cleanrl_utils/data/published_ppo_atari.csv`): each difference and whether it is inside the seeds' spread"""
    aggregate_min_games: int = 5
    """write the human-normalised aggregates (rliable's mean, median, IQM, optimality gap, performance profiles, probability of improvement) only over at least this many games with known random and human scores that every script of a protocol ran"""
    bootstrap_samples: int = 2000
    """the stratified bootstrap resamples behind every confidence interval and band of the aggregates (rliable's default: 50,000 for the interval estimates, 2,000 for the profiles)"""
    confidence: float = 0.95
    """the level of the confidence intervals and bands"""
    bootstrap_seed: int = 0
    """the seed of the bootstrap (the same runs and seed give the same intervals; rliable 1.2.0 after `np.random.seed(SEED)` gives the same too)"""
