"""The report's `--since` on a run whose start time a date cannot hold (the fourth probe, issue
54): the run folder's name says a time past the year 9999; its files are fine. It was "could not
be read" (`fromtimestamp`'s ValueError); the day is then config.json's `start_time`, or unknown."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from cleanrl_utils.report.loading import RunLog
from cleanrl_utils.report.selection import Selection, start_day

FAR = [300_000_000_000, 10**30]  # past the year 9999 (ValueError), past a C time_t (Overflow)


def run_started(start_time: int, config: dict | None = None) -> RunLog:
    name = f"Breakout-v5__ppo_atari_envpool__1__{start_time}"
    return RunLog(Path("runs") / name, name, config=config)


@pytest.mark.parametrize("start_time", FAR)
def test_a_start_time_past_the_year_9999_falls_back_to_config_json(start_time):
    run = run_started(start_time, {"start_time": "2024-03-02T23:30:00-0100"})
    assert start_day(run) == dt.date(2024, 3, 3)  # (UTC)
    assert Selection(since=dt.date(2024, 3, 1))(run)
    assert not Selection(since=dt.date(2024, 3, 4))(run)


@pytest.mark.parametrize("start_time", FAR)
def test_a_start_time_nothing_can_date_is_unknown_not_an_error(start_time):
    for config in (None, {}, {"start_time": "+10000-01-01T00:00:00+0000"}):
        run = run_started(start_time, config)
        assert start_day(run) is None
        assert not Selection(since=dt.date(2024, 3, 1))(run)  # (unknown: not selected)
    late = {"start_time": "9999-12-31T23:00:00-0500"}  # (in UTC: the year 10000)
    assert start_day(run_started(start_time, late)) is None


def test_a_start_time_a_date_can_hold_is_the_name_s():
    assert start_day(run_started(1_700_000_000)) == dt.date(2023, 11, 14)
