# SPDX-License-Identifier: MIT
"""Progress bars on stderr off a terminal (a pipe, a log file): the finished bar once, and after a
failure nothing, so that a failed command's one error line stands alone."""

import os
import subprocess
import sys

from thrifty.progress import ProgressBar

NAN_LOSS = ("from thrifty.workloads.digits import make_workload as digits\nCALLS = [0]\n\n"
            "def make_workload():\n    w = digits()\n    base = w.loss_fn\n\n"
            "    def loss_fn(out, y):\n        CALLS[0] += 1\n"
            "        return base(out, y) * (float('nan') if CALLS[0] > 2 else 1.0)\n"
            "    w.loss_fn = loss_fn\n    return w\n")


def test_off_a_terminal_a_finished_bar_prints_once_and_a_failed_one_not_at_all(capsys):
    """Mutation caught: the failed bar printed ("train 0/20 0:00:00" above the error's line)."""
    done = ProgressBar("train", 4, fields=("rate",))
    done.update(4, rate="9 samples/s")
    out = capsys.readouterr().err
    assert [line for line in out.splitlines() if line.strip()] == [out.strip()] and "4/4" in out
    failed = ProgressBar("train", 20, fields=("rate",))
    failed.update(1, rate="9 samples/s")
    failed.close(failed=True)
    assert capsys.readouterr().err == ""


def test_a_failed_train_on_two_ranks_says_one_line_on_a_piped_stderr(tmp_path):
    """The ranks' NaN loss ends the run with exit code 2 and the error's line alone on stderr.
    Mutation caught: the trainer closing its bar as finished after the failure."""
    (tmp_path / "nan_loss.py").write_text(NAN_LOSS)
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-m", "thrifty.cli", "train", "--workload", "nan_loss.py", "--steps", "20",
                           "--nproc", "2", "--db", "t.db", "--run-dir", "run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the loss is nan"), done.stderr
