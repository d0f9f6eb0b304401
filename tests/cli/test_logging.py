# SPDX-License-Identifier: MIT
"""`thrifty -v` shows thrifty's INFO records on stderr (rich's handler), `-vv` its DEBUG records;
without either nothing below a warning; a library user who configures nothing sees nothing."""

import json
import os
import subprocess
import sys
from pathlib import Path

from thrifty.transient.registry import data_file

SRC = Path(__file__).resolve().parents[2] / "src"


def _flat(text: str) -> str:
    """Rich wraps long records at the console's width; words stay whole."""
    return " ".join(text.split())


def test_verbose_shows_a_lifetime_fit_as_an_info_record(run_cli):
    code, out, err = run_cli("-v", "preempt", "fit", data_file(), "--family", "weibull", "--json")
    assert code == 0
    assert json.loads(out)["chosen"]["model"] == "weibull"
    assert "INFO" in err and "fitted weibull (mle) to 1442 lifetimes" in _flat(err)


def test_without_verbose_the_same_command_logs_nothing(run_cli):
    code, out, err = run_cli("preempt", "fit", data_file(), "--family", "weibull", "--json")
    assert code == 0 and json.loads(out)["chosen"]["model"] == "weibull"
    assert "fitted" not in err and "INFO" not in err


def test_debug_records_need_two_vs(run_cli):
    args = ("preempt", "schedule", "--job-hours", "2", "--lifetime-model", "gcp-2019", "--json")
    code, _, err = run_cli("-v", *args)
    assert code == 0 and "DEBUG" not in err
    code, _, err = run_cli("-vv", *args)
    assert code == 0 and "DEBUG" in err and "lifetime model gcp-2019: bundled" in _flat(err)


def test_a_library_user_who_configures_nothing_sees_nothing():
    script = ("from thrifty.transient.fitting import fit, read_lifetimes\n"
              "from thrifty.transient.registry import data_file\n"
              "print(fit(read_lifetimes(data_file()), 'weibull').model.name)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(SRC)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "weibull" and done.stderr == ""
