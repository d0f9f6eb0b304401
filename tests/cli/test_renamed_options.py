# SPDX-License-Identifier: MIT
"""One meaning per option: `--model` named a lifetime model, a distribution family and a step-time
JSON and a surrogate's folder; each command now says what it takes, and the old spelling is refused in one line that names
the new one (exit code 2), before any other option is looked at."""

import json

import pytest

from thrifty.transient.registry import data_file

RENAMED = [
    (("preempt", "fit", str(data_file())), "--family", "weibull"),
    (("preempt", "schedule", "--job-hours", "2"), "--lifetime-model", "gcp-2019"),
    (("preempt", "reuse", "--job-hours", "1"), "--lifetime-model", "gcp-2019"),
    (("preempt", "spot", "--job-hours", "1", "--deadline", "3h", "--spot-price", "1", "--on-demand-price", "3",
      "--runs", "10"), "--lifetime-model", "gcp-2019"),
    (("model", "predict", "--configs", "nonexistent.csv"), "--step-time-model", "nonexistent.json"),
    (("run", "--checkpoint-dir", "nonexistent"), "--lifetime-model", "gcp-2019"),
    (("md", "sweep", "--space", "nonexistent.toml", "--budget-runs", "1"), "--lifetime-model", "gcp-2019"),
    (("md", "predict", "--h", "3", "--zp", "1", "--c", "0.5", "--d-plus", "0.474", "--d-minus", "0.627"),
     "--surrogate", "nonexistent"),
]


@pytest.mark.parametrize("command, new, value", RENAMED, ids=[" ".join(c[:2]) for c, _, _ in RENAMED])
def test_the_old_spelling_is_refused_in_one_line_naming_the_new(run_cli, command, new, value):
    code, out, err = run_cli(*command, "--model", value)
    lines = err.strip().splitlines()
    assert code == 2 and out == ""
    assert len(lines) == 1 and lines[0].startswith("error: --model is now " + new), err


@pytest.mark.parametrize("command, new, value", RENAMED[:4], ids=[" ".join(c[:2]) for c, _, _ in RENAMED[:4]])
def test_the_new_spelling_works(run_cli, command, new, value):
    code, out, err = run_cli(*command, new, value, "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body.get("model", body.get("chosen", {}).get("model")) in ("gcp-2019", "weibull")


@pytest.mark.parametrize("command", [("preempt", "fit"), ("preempt", "schedule"), ("model", "predict"), ("run",),
                                     ("md", "sweep"), ("md", "predict")])
def test_help_shows_only_the_new_spelling(run_cli, command):
    code, out, _ = run_cli(*command, "--help")
    assert code == 0 and "--model " not in out
