# SPDX-License-Identifier: MIT
"""`thrifty train` under `thrifty run`: checkpoints on request, saves and stops on a notice, is
restarted, resumes by itself and ends bit for bit where an uninterrupted run ends."""

import json
import sys
from pathlib import Path

import pytest

from thrifty.transient.protocol import FALLBACK_LOG
from thrifty.transient.runner import Runner


def _train(run_dir: Path) -> list[str]:
    # --slowdown 3,3 (sleep emulation, no extra CPU) stretches the training to about twice the
    # start-up, so the start-up's jitter under a loaded suite cannot decide the count of
    # preemptions below. (A neighbour's load moves the training's speed between two runs too:
    # 2.5x between the reference and the first VM once, hence the wide margins below.)
    return [sys.executable, "-m", "thrifty.cli", "train", "--nproc", "2", "--policy", "uniform",
            "--slowdown", "3,3", "--b-max", "64", "--steps", "750", "--checkpoint-every", "0", "--run-dir", str(run_dir),
            "--db", str(run_dir.parent / f"{run_dir.name}.db"), "--json"]


def _times(report, event: str) -> list[float]:
    return [e["t_s"] for e in report.events if e["event"] == event]


@pytest.mark.timeout(1800)  # 53 s alone on 2 quiet cores; minutes in a loaded suite (a hang guard)
def test_training_survives_a_kill_and_a_notice_and_ends_bit_identical(tmp_path, scripted_lifetimes, short_tmp,
                                                                      monkeypatch):
    """Mutation caught (tried): a restore that drops the sampler's position (train.checkpoint.restore
    setting sample_offset to 0: the parameter digests differ)."""
    monkeypatch.setenv("TMPDIR", str(short_tmp))  # the killed attempt's temporary folders: it cannot remove them
    reference = Runner(_train(tmp_path / "ref"), tmp_path / "ck-ref", intervals_s=[0.25]).run()
    assert reference.exit_code == 0
    # the undisturbed run, measured: start-up until the first step (the first checkpoint, asked
    # for before the ranks were up), then the training until the final checkpoint
    saves = _times(reference, "checkpoint")
    startup_s, work_s = saves[0], saves[-1] - saves[0]
    # Two VMs, then one that lives on: the first lives for the start-up and 30% of the training
    # and is killed outright; the second lives for the start-up and 45% and is warned a quarter of
    # the training after its start-up (it resumed at about 30%: it stops near 55%). Whatever this
    # machine's speed, the job is preempted exactly twice, both times while it trains, and
    # finishes on the third VM: the notice's quarter of the training is the margin for the
    # restart's start-up jitter (6 s on a 16 s start-up seen), the 45% left undone the margin for
    # a VM that trains faster than the reference did. 750 steps keep the training long against that
    # jitter: at 250 (about 5 s of training alone) a restart that started up a few seconds faster than
    # the reference finished before its notice, twice in five loaded suites.
    first_s, second_s = startup_s + 0.3 * work_s, startup_s + 0.45 * work_s
    report = Runner(_train(tmp_path / "inj"), tmp_path / "ck-inj", intervals_s=[0.25], notice_s=0.2 * work_s,
                    lifetimes=scripted_lifetimes([first_s, second_s, float("inf")]), kill="mixed",
                    timeout_s=700).run()
    assert report.exit_code == 0 and report.preemptions == 2 and report.notices == 1
    ref = json.loads((tmp_path / "ref" / "summary.json").read_text())
    inj = json.loads((tmp_path / "inj" / "summary.json").read_text())
    assert inj["parameter_digests"] == ref["parameter_digests"]  # bit-identical parameters
    assert inj["steps"] == ref["steps"] == 750
    assert inj["resumed_at_step"] > 0  # the last VM continued from a checkpoint, not from scratch
    # the warned attempt saved on its notice, before its VM's end
    notice = next(e for e in report.events if e["event"] == "preemption_notice")
    warned = next(e for e in report.events if e["event"] == "preemption" and e["notice"])
    assert any(e["event"] == "checkpoint" and e["attempt"] == warned["attempt"]
               and notice["t_s"] < e["t_s"] < warned["t_s"] for e in report.events)
    assert not (tmp_path / "ck-inj" / FALLBACK_LOG).exists()  # no checkpoint lost
    # every attempt reported the end of its restart, and the checkpoints their costs (transient.protocol;
    # a kill may come between a checkpoint's rename and its report)
    assert len(reference.restart_costs_s) == 1 and len(report.restart_costs_s) == report.attempts == 3
    assert report.checkpoints - report.preemptions <= len(report.checkpoint_costs_s) <= report.checkpoints
