# SPDX-License-Identifier: MIT
"""`thrifty train` from the command line: bad input is one line and exit code 2, nothing written."""

import json

import pytest


@pytest.mark.parametrize("args, message", [
    (["--global-batch", "1", "--nproc", "2"], "global batch 1 is smaller than the 2 workers"),
    (["--b-min", "40", "--nproc", "2"], "b_min 40 is larger than B / n = 64/2"),
    (["--slowdown", "0,1"], "slowdown factors must be positive"),
    (["--slowdown", "a,b"], "--slowdown must be comma-separated positive numbers"),
    (["--slowdown", "1,2,3", "--nproc", "2"], "for 3 workers, the run has 2"),
    (["--hetero-profile", "HL3", "--nproc", "4"], "unknown heterogeneity profile 'HL3'"),
    (["--hetero-profile", "HL4", "--nproc", "2"], "for 4 workers, the run has 2"),
    (["--nproc", "64"], "--nproc 64 is outside 1.."),
    (["--policy", "fast"], "unknown policy 'fast'"),
    (["--mode", "hogwild"], "unknown mode 'hogwild'"),
    (["--emulate", "magic"], "unknown emulation 'magic'"),
    (["--global-batch", "5000"], "exceeds the training set"),
    (["--b-max", "10", "--nproc", "2"], "does not fit"),
    (["--capacities", "1,x", "--policy", "static"], "--capacities must be comma-separated numbers"),
    (["--slowdown", "1,2", "--hetero-profile", "HL2"], "at most one of"),
    # a percentage for a fraction trained to the epoch cap (mutation caught: the range check removed)
    (["--until-target", "--target", "95"], "--target 95 can never be met: builtin:digits's accuracy is a fraction in "
                                           "[0, 1] (did you mean 0.95?)"),
    (["--until-target", "--target", "-0.5"], "--target -0.5 is met by any model: builtin:digits's accuracy is a "
                                             "fraction in [0, 1]"),
])
def test_bad_input_is_one_line_and_exit_code_2(run_cli, tmp_path, args, message):
    code, out, err = run_cli("train", *args, "--db", tmp_path / "t.db", "--run-dir", tmp_path / "run")
    assert code == 2
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_resume_from_missing_or_corrupt_checkpoint(run_cli, tmp_path):
    code, _, err = run_cli("train", "--resume", "--run-dir", tmp_path / "none", "--db", tmp_path / "t.db")
    assert code == 2 and "checkpoint not found" in err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "ckpt-000001.bin").write_bytes(b"THRIFTY1" + b"\0" * 32 + b"not a torch file")
    code, _, err = run_cli("train", "--resume", "--run-dir", tmp_path / "bad", "--db", tmp_path / "t.db")
    assert code == 2 and "corrupt" in err


@pytest.mark.timeout(240)
def test_train_json_summary_and_store(run_cli, tmp_path):
    from thrifty.store import Store
    code, out, err = run_cli("train", "--nproc", "2", "--steps", "30", "--slowdown", "1,2", "--json",
                             "--run-dir", tmp_path / "run", "--db", tmp_path / "t.db")
    assert code == 0, err
    summary = json.loads(out)
    for key in ("wall_time_s", "samples_per_s", "final_metric", "final_batch_sizes", "adjustments",
                "wait_fraction"):
        assert key in summary
    # epochs in the sampler's steps per epoch (mutation caught: the epochs the steps touched, 2 here,
    # and a partial epoch's steps taken for a whole one's)
    from thrifty.workloads import load_workload
    per_epoch = load_workload("builtin:digits").train_size // summary["global_batch"]
    assert summary["epochs"] == pytest.approx(30 / per_epoch)
    assert summary["time_per_epoch_s"] == pytest.approx(summary["train_time_s"] / 30 * per_epoch)
    with Store(tmp_path / "t.db") as store:
        assert store.count("train_runs") == 1 and store.count("train_steps") == 60
    for name in ("steps.csv", "evals.csv", "summary.json", "training.png", "ckpt-000001.bin"):
        assert (tmp_path / "run" / name).exists()


def test_the_same_resume_if_any_line_on_its_finished_run_is_stored_once_and_prints_its_summary(run_cli, tmp_path):
    """The plan's line run again on its finished run (a review: it was stored a second time and its
    summary.json rewritten, resumed_at_step and wall time changed). Mutation caught: the trainer's
    nothing_to_do check removed."""
    from thrifty.store import Store
    line = ("train", "--nproc", "1", "--steps", "6", "--json", "--resume-if-any", "--run-dir", tmp_path / "run",
            "--db", tmp_path / "t.db")
    code, first, err = run_cli(*line)
    assert code == 0, err
    code, again, err = run_cli(*line)
    assert code == 0 and "is done (step 6): nothing to do" in " ".join(err.split()), err
    assert json.loads(again) == json.loads(first) == json.loads((tmp_path / "run" / "summary.json").read_text())
    with Store(tmp_path / "t.db") as store:
        assert store.count("train_runs") == 1


def test_thrifty_train_as_its_own_process_leaves_no_temporary_folder(tmp_path, short_tmp):
    """`thrifty train` ends with os._exit (no interpreter teardown); multiprocessing's folder for the
    forkserver's socket (pymp-*) is removed first, on success and on a refused start. Mutation: the
    finalizers skipped (one pymp-* folder left per run)."""
    import os
    import subprocess
    import sys
    scratch = short_tmp
    env = {**os.environ, "TMPDIR": str(scratch), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    base = [sys.executable, "-m", "thrifty.cli", "train", "--workload", "builtin:digits", "--nproc", "1",
            "--run-dir", str(tmp_path / "run"), "--db", str(tmp_path / "t.db")]
    done = subprocess.run([*base, "--steps", "2"], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    refused = subprocess.run([*base, "--device", "cuda:7"], capture_output=True, text=True, timeout=300, env=env)
    assert refused.returncode == 2, refused.stderr
    # (torch keeps its compile cache, torchinductor_*, there on purpose)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("pymp-")] == []


@pytest.mark.timeout(300)
def test_a_run_folder_with_an_earlier_runs_checkpoints_is_kept_unless_forced(run_cli, tmp_path):
    # mutations caught: a fresh run deleting the earlier run's checkpoints without a word (the check
    # removed); a resume of a run whose --steps are done reporting success (steps 50 of 40); a
    # resumed run that moved its global batch summarised at the new B alone (3 epochs for --epochs 2);
    # a resume of a run whose --epochs are done training on or reporting success
    run, db = tmp_path / "run", tmp_path / "t.db"
    code, out, err = run_cli("train", "--global-batch", "64", "--steps", "10", "--checkpoint-every", "5",
                             "--run-dir", run, "--db", db, "--json")
    assert code == 0, err
    # the run folder's summary names its row in --db (mutation caught: summary.json without it)
    assert json.loads((run / "summary.json").read_text())["run_id"] == json.loads(out)["run_id"]
    kept = sorted(p.name for p in run.glob("ckpt-*.bin"))
    code, _, err = run_cli("train", "--steps", "5", "--run-dir", run, "--db", db)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "holds an earlier run's checkpoints" in err and "--resume" in err and "--force" in err
    assert "in use" not in err and sorted(p.name for p in run.glob("ckpt-*.bin")) == kept
    code, _, err = run_cli("train", "--steps", "10", "--resume", "--run-dir", run, "--db", db)
    assert code == 2 and "--steps 10 is done" in err and len(err.strip().splitlines()) == 1, err
    code, _, err = run_cli("train", "--resume", "--force", "--run-dir", run, "--db", db)
    assert code == 2 and "not both" in err
    # a setting refused on the earlier run's folder is the setting's error alone: no "add --resume" for
    # checkpoints this command did not write (a new user's pass; mutation caught: the suffix whenever the
    # folder holds checkpoints)
    code, _, err = run_cli("train", "--steps", "5", "--slowdown", "1,2,3", "--run-dir", run, "--db", db)
    assert code == 2 and "slowdown" in err and "--resume" not in err and len(err.strip().splitlines()) == 1, err
    # on at twice the batch to the end of one epoch: 10 steps of 64, then the rest at 128
    code, out, err = run_cli("train", "--resume", "--epochs", "1", "--global-batch", "128", "--run-dir", run,
                             "--db", db, "--json")
    assert code == 0, err
    summary = json.loads(out)
    from thrifty.workloads import load_workload
    size = load_workload("builtin:digits").train_size
    samples = 10 * 64 + (size - 10 * 64) // 128 * 128
    assert summary["epochs"] == pytest.approx(samples / (size // 128 * 128))
    assert summary["samples_per_s"] == pytest.approx(samples / summary["train_time_s"])
    # its epoch is done: a resume for the same --epochs is refused and leaves the folder as it was
    done = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    code, _, err = run_cli("train", "--resume", "--epochs", "1", "--global-batch", "128", "--run-dir", run,
                           "--db", db)
    assert code == 2 and ": --epochs 1 is done" in err and len(err.strip().splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == done
    # a resume that gives no --global-batch goes on at the checkpoint's, 128 (mutation caught: the
    # workload's default, 64, as before)
    code, out, err = run_cli("train", "--resume", "--epochs", "1.5", "--run-dir", run, "--db", db, "--json")
    assert code == 0, err
    assert json.loads(out)["global_batch"] == 128
    # a resumed run's table says which times span every session and which this one (mutation
    # caught: "wall time" of this session beside the samples/s of all, unlabelled)
    code, out, err = run_cli("train", "--resume", "--epochs", "1.75", "--run-dir", run, "--db", db)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "samples/s (all sessions)" in flat and "wall time (this session)" in flat, out
    code, _, err = run_cli("train", "--force", "--steps", "3", "--checkpoint-every", "0", "--run-dir", run,
                           "--db", db)
    assert code == 0, err
    assert [p.name for p in run.glob("ckpt-*.bin")] == ["ckpt-000001.bin"]


@pytest.mark.timeout(300)
def test_a_resume_whose_epochs_are_done_is_refused_and_leaves_the_folder_as_it_was(run_cli, tmp_path):
    # mutations caught: the --epochs check removed (the resume reported success, training nothing);
    # the log cut back to the checkpoint before the refusal (steps.csv lost its rows past step 5)
    run, db = tmp_path / "run", tmp_path / "t.db"
    code, _, err = run_cli("train", "--global-batch", "64", "--steps", "10", "--checkpoint-every", "5",
                           "--run-dir", run, "--db", db)
    assert code == 0, err
    sorted(run.glob("ckpt-*.bin"))[-1].unlink()  # step 10's: the newest left is step 5's, the log ahead of it
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    # 0.1 of 22 steps of 64 an epoch: 3 steps, done by step 5
    code, _, err = run_cli("train", "--resume", "--epochs", "0.1", "--global-batch", "64", "--run-dir", run,
                           "--db", db)
    assert code == 2 and "is at step 5: --epochs 0.1 is done" in err and len(err.strip().splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


@pytest.mark.timeout(300)
def test_under_thrifty_run_a_run_folder_holding_another_runs_checkpoints_is_refused_unless_forced(
        run_cli, tmp_path, monkeypatch):
    # mutation caught: the run's summary and logs written beside an earlier run's checkpoints, which
    # a later --resume there would continue (the runner's checkpoints go to its own folder)
    from thrifty.transient.protocol import ENV_DIR
    run, db = tmp_path / "run", tmp_path / "t.db"
    code, _, err = run_cli("train", "--global-batch", "64", "--steps", "4", "--run-dir", run, "--db", db)
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    monkeypatch.setenv(ENV_DIR, str(tmp_path / "runner"))
    code, _, err = run_cli("train", "--global-batch", "64", "--steps", "4", "--run-dir", run, "--db", db)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "holds an earlier run's checkpoints" in err and "--force" in err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    code, _, err = run_cli("train", "--global-batch", "64", "--steps", "4", "--run-dir", run, "--db", db, "--force")
    assert code == 0, err
    assert not list(run.glob("ckpt-*.bin")) and list((tmp_path / "runner").glob("ckpt-*.bin"))


@pytest.mark.timeout(300)
def test_a_resume_of_a_run_that_met_its_target_is_refused_under_until_target(run_cli, tmp_path):
    # mutation caught: the resumed --until-target run training on past the target it had met
    # (5 more steps each resume; the summary then said steps 75, steps_to_target 65)
    run, db = tmp_path / "run", tmp_path / "t.db"
    code, out, err = run_cli("train", "--until-target", "--epochs", "30", "--run-dir", run, "--db", db, "--json")
    assert code == 0, err
    first = json.loads(out)
    assert first["steps"] == first["steps_to_target"]
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    code, _, err = run_cli("train", "--resume", "--until-target", "--epochs", "30", "--run-dir", run, "--db", db)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"had met its target by step {first['steps']} (accuracy " in err and "nothing left to train" in err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


@pytest.mark.timeout(300)
def test_ctrl_c_on_a_train_run_says_where_its_checkpoint_stays(tmp_path, short_tmp):
    """A terminal's Ctrl-C (SIGINT to the process group) stops the run; the line says where the
    checkpoint it wrote stays and how to go on (it said "interrupted" alone; mutation caught: the
    note not registered)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "train", "--nproc", "2", "--checkpoint-every", "5",
                             "--steps", "100000", "--run-dir", str(run), "--db", str(tmp_path / "t.db")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while not list(run.glob("ckpt-*.bin")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"interrupted: the run's last checkpoint stays in {run}: add --resume" in " ".join(err.split()), err
    assert list(run.glob("ckpt-*.bin"))


@pytest.mark.timeout(300)
def test_ctrl_c_under_thrifty_run_is_the_notice_every_rank_saves_on(tmp_path, short_tmp):
    """Under `thrifty run` a terminal's Ctrl-C (SIGINT to the whole group) is the notice: the run saves
    after the current step and exits 75, no rank dies of it (a new user's pass: the forkserver and the
    ranks died with KeyboardInterrupt tracebacks and nothing was saved; mutation caught: the worker
    server started with SIGINT at its default)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    stream = tmp_path / "steps.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(tmp_path / "ck"), "--",
                             sys.executable, "-m", "thrifty.cli", "train", "--nproc", "2", "--steps", "100000",
                             "--run-dir", str(tmp_path / "run"), "--db", str(tmp_path / "t.db"), "--step-stream",
                             str(stream)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    while not (stream.exists() and stream.read_text().count("\n") >= 5) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-3000:]
    assert "checkpoint saved" in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert list((tmp_path / "ck").glob("ckpt-*.bin"))


@pytest.mark.timeout(300)
def test_a_sigterm_to_a_train_run_alone_saves_it_and_exits_75(tmp_path, short_tmp):
    """Without `thrifty run` a SIGTERM is the notice too: every rank saves after the same step, the
    run exits 75 and `--resume` goes on from there. Mutation caught: the launcher's SIGTERM left to
    the CLI's stop (it ended at once: no checkpoint since the last periodic one, here none)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    stream, run = tmp_path / "streams" / "steps.jsonl", tmp_path / "run"  # a folder the run makes (mutation: none)
    # --run-dir relative to the working folder: the JSON names it absolute, as summary.json does (a new
    # user's pass: "run" there, the summary's path elsewhere; mutation caught: the option's text echoed)
    base = [sys.executable, "-m", "thrifty.cli", "train", "--nproc", "2", "--checkpoint-every", "0",
            "--run-dir", "run", "--db", str(tmp_path / "t.db"), "--step-stream", str(stream)]
    proc = subprocess.Popen([*base, "--steps", "100000", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=tmp_path)
    deadline = time.monotonic() + 240
    while not (stream.exists() and len(stream.read_text().splitlines()) >= 5) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    # to every process of the run, as a VM's shutdown or `timeout` sends it (mutation caught too: the
    # ranks left to die of it, "rank 1 died (killed by SIGTERM)", exit 2, nothing saved)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err
    assert "checkpoint saved; the same command with --resume goes on" in err
    saved = len(stream.read_text().splitlines())
    # --json says so on stdout too (it printed nothing; mutation caught: the JSON line dropped)
    said = json.loads(out)
    assert said["preempted"] is True and said["step"] == saved and said["run_dir"] == str(run)
    assert said["checkpoint_dir"] == str(run)  # alone; under `thrifty run`, its folder
    assert [p.name for p in run.glob("ckpt-*.bin")] == ["ckpt-000001.bin"]
    done = subprocess.run([*base, "--resume", "--steps", str(saved + 3)], env=env, capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(stream.read_text().splitlines()) == saved + 3  # on from the saved step, none redone


def test_a_second_sigterm_ends_a_launcher_that_took_the_first_as_a_notice(tmp_path):
    """A hung run must still stop on `kill` (the launcher's handler; a rank's counts every SIGTERM:
    tests/plan/test_spot_restart.py). Mutation caught: every SIGTERM only counted (the process lived
    on after the second)."""
    import subprocess
    import sys
    script = ("import os, signal, time\n"
              "from thrifty.train.preemption import NOTICE, notice_on_sigterm\n"
              "with notice_on_sigterm(second_stops=True) as flags:\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    time.sleep(0.2)\n"
              "    print('notice', flags[NOTICE], flush=True)\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    time.sleep(30)\n"
              "print('lived on')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["notice", "1"] and done.returncode == -15, (done.stdout, done.stderr)


@pytest.mark.timeout(300)
def test_a_sigterm_to_an_asp_run_stops_it_in_one_line_and_removes_its_folder(tmp_path, short_tmp):
    """ASP keeps no checkpoints, so a SIGTERM is no notice: the run stops as on Ctrl-C. A new user's
    pass: a silent 143 that left the run directory with its lock. Mutations caught: no SIGTERM
    handler for asp (killed by the signal, the folder left); the folder not removed on an interrupt."""
    import os
    import signal
    import subprocess
    import sys
    import time
    env = {**os.environ, "TMPDIR": str(short_tmp), "GLOO_SOCKET_IFNAME": "lo", "MASTER_ADDR": "127.0.0.1"}
    run = tmp_path / "made" / "run"
    proc = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "train", "--mode", "asp", "--steps", "100000",
                             "--run-dir", str(run), "--db", str(tmp_path / "t.db")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 240
    while not (run / ".lock").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    time.sleep(2.0)  # the workers and the server started
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert [line for line in err.splitlines() if line.startswith("error:")] == ["error: terminated"], err
    assert not (tmp_path / "made").exists()


@pytest.mark.timeout(300)
def test_amp_on_the_cpu_runs_and_says_it_is_slow_there(run_cli, tmp_path):
    """Mutation caught: the warning left out (a short digits run took 8x fp32's wall time without a
    word); bf16, fast on CPUs that have it, says nothing."""
    code, _, err = run_cli("train", "--precision", "amp", "--steps", "2", "--run-dir", tmp_path / "amp",
                           "--db", tmp_path / "t.db", "--json")
    assert code == 0, err
    assert "--precision amp on the CPU runs float16 autocast slowly" in " ".join(err.split())
    code, _, err = run_cli("train", "--precision", "bf16", "--steps", "2", "--run-dir", tmp_path / "bf16",
                           "--db", tmp_path / "t.db", "--json")
    assert code == 0 and "autocast slowly" not in err, err
    # tf32 is a CUDA matmul mode: on the CPU, fp32's result, said (a new user's pass: same digest, unsaid)
    code, _, err = run_cli("train", "--precision", "tf32", "--steps", "2", "--run-dir", tmp_path / "tf32",
                           "--db", tmp_path / "t.db", "--json")
    assert code == 0 and "--precision tf32 on the CPU trains in plain fp32" in " ".join(err.split()), err


def test_a_failed_run_keeps_its_log_where_its_checkpoints_are_in_the_bucket(tmp_path, monkeypatch):
    """A spot task's run (checkpoints in THRIFTY_CHECKPOINT_DIR) that fails keeps the run folder's
    log the resume goes on with (a review: it was removed, the next summary short of the earlier
    steps). Mutation caught: worth keeping only for a checkpoint in the run folder."""
    from thrifty.cli.train import _worth_keeping
    from thrifty.transient.protocol import ENV_DIR
    run, bucket = tmp_path / "run", tmp_path / "bucket"
    run.mkdir()
    bucket.mkdir()
    (run / "steps.csv").write_text("step\n")
    monkeypatch.setenv(ENV_DIR, str(bucket))
    assert not _worth_keeping(run)  # no checkpoint anywhere: the half-made run goes
    (bucket / "ckpt-000001.bin").write_bytes(b"THRIFTY1")
    assert _worth_keeping(run)
    (run / "steps.csv").unlink()
    assert not _worth_keeping(run)  # nothing of the run's own here
