# SPDX-License-Identifier: MIT
"""Heterogeneity profiles, schedules and their emulation (sleep; cgroup where root allows it)."""

import json
import os
import time

import pytest

from thrifty.train.emulation import CGROUP_CPU_ROOT, Slowdown, cgroup_run_dir, remove_cgroups
from thrifty.train.hetero import HeteroError, load_schedule, named_schedule, parse_slowdown, profile_slowdowns


def heterogeneity_level(slowdowns: tuple[float, ...]) -> float:
    """OmniLearn's HL: the slowest rank's step time over the fastest's."""
    return max(slowdowns) / min(slowdowns)


@pytest.mark.parametrize("name, level", [("HL1", 1), ("HL2", 2), ("HL4", 4), ("HL8", 8), ("hl4", 4)])
def test_named_profiles_have_their_heterogeneity_level(name, level):
    factors = profile_slowdowns(name)
    assert len(factors) == 4 and min(factors) == 1.0
    assert heterogeneity_level(factors) == pytest.approx(level)


def test_hl4_speeds_follow_the_core_split():
    assert profile_slowdowns("HL4") == pytest.approx((24 / 9, 24 / 9, 4.0, 1.0))


def test_dynamic_schedule_walks_up_and_down_the_levels():
    schedule = named_schedule("dynamic", 70)
    levels = [heterogeneity_level(schedule.at(step)) for step in range(0, 70, 10)]
    assert levels == pytest.approx([1, 2, 4, 8, 4, 2, 1])
    assert schedule.change_steps() == [10, 20, 30, 40, 50, 60]


@pytest.mark.parametrize("text", ["0,1", "1,-2", "a,b", "", "1,nan"])
def test_bad_slowdowns_are_refused(text):
    with pytest.raises(HeteroError):
        parse_slowdown(text)


def test_unknown_profile():
    with pytest.raises(HeteroError, match="unknown heterogeneity profile 'HL3'"):
        named_schedule("HL3", 100)


def test_schedule_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"step": 0, "profile": "HL1"}, {"step": 5, "slowdown": [1, 1, 2, 3]}]))
    schedule = load_schedule(path)
    assert schedule.at(4) == (1.0,) * 4 and schedule.at(5) == (1.0, 1.0, 2.0, 3.0)
    path.write_text(json.dumps([{"step": 3, "profile": "HL2"}]))
    with pytest.raises(HeteroError, match="start at step 0"):
        load_schedule(path)
    path.write_text("[{")
    with pytest.raises(HeteroError, match="not valid JSON"):
        load_schedule(path)
    with pytest.raises(HeteroError, match="not found"):
        load_schedule(tmp_path / "missing.json")
    # a misspelt key beside a valid one had been ignored (mutation caught: the key check removed)
    path.write_text(json.dumps([{"step": 0, "profile": "HL1", "slowdwn": [1, 4, 1, 1]}]))
    with pytest.raises(HeteroError, match="unknown key 'slowdwn'"):
        load_schedule(path)
    path.write_text(json.dumps([{"step": 0, "profile": "HL1", "slowdown": [1, 4, 1, 1]}]))
    with pytest.raises(HeteroError, match="not both"):
        load_schedule(path)


def test_sleep_emulation_stretches_compute_by_the_factor(monkeypatch):
    """A rank at factor 3 sleeps twice its compute time and reports the sleep it measured (at least
    that long: a loaded machine oversleeps, so no upper bound). Mutations caught (tried): sleeping
    factor x compute; reporting the time asked for instead of the time measured."""
    asked, real_sleep = [], time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: (asked.append(s), real_sleep(s + 0.01)))  # an oversleep
    slept = Slowdown(parse_slowdown("1,3"), rank=1).after_compute(0, 0.02)
    assert asked == [pytest.approx(0.04)] and slept >= 0.05
    assert Slowdown(parse_slowdown("1,3"), rank=0).after_compute(0, 0.02) == 0.0 and len(asked) == 1


cgroup_ok = os.geteuid() == 0 and (CGROUP_CPU_ROOT / "cpu.cfs_quota_us").exists() and \
    os.access(CGROUP_CPU_ROOT, os.W_OK)


@pytest.mark.skipif(not cgroup_ok, reason="needs root and the cgroup v1 cpu controller")
def test_cgroup_emulation_sets_quota_and_cleans_up():
    tag = f"test-{os.getpid()}"
    schedule = named_schedule("dynamic", 7)  # rank 2: factor 1 at step 0, then 2 (HL2: 8 of 16 cores)
    slow = Slowdown(schedule, rank=2, mode="cgroup", tag=tag)
    try:
        group = cgroup_run_dir(tag) / "rank2"
        assert str(os.getpid()) in (group / "cgroup.procs").read_text().split()
        slow.before_step(0)
        assert (group / "cpu.cfs_quota_us").read_text().strip() == "-1"
        slow.before_step(1)
        assert int((group / "cpu.cfs_quota_us").read_text()) == 50_000
    finally:
        slow.close()
    remove_cgroups(tag)
    assert not cgroup_run_dir(tag).exists()
    assert str(os.getpid()) in (CGROUP_CPU_ROOT / "cgroup.procs").read_text().split()
