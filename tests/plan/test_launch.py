# SPDX-License-Identifier: MIT
"""The launch commands `thrifty plan` prints run as printed: torchrun line and SkyPilot task."""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from launch_choices import CPU_ONE_NODE, fake_bin, plan_choice

from thrifty.plan import launch
from thrifty.plan.bucket import run_folder
from thrifty.plan.launch import (
    epochs_text,
    project_root,
    skypilot_task,
    skypilot_yaml,
    torchrun_command,
    training_requirements,
)
from thrifty.records import RunLog

# SkyPilot's task YAML (docs.skypilot.co, "YAML configuration"): the keys this task may use.
TASK_KEYS = {"name", "workdir", "file_mounts", "resources", "num_nodes", "envs", "setup", "run"}
RESOURCE_KEYS = {"cloud", "region", "zone", "instance_type", "accelerators", "use_spot", "cpus",
                 "memory", "disk_size", "image_id", "job_recovery"}
SKYPILOT_VARS = ("SKYPILOT_NODE_IPS", "SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES")


def _bash(script: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)


# --- torchrun line ---

@pytest.mark.parametrize("until_target", [True, False])
def test_torchrun_line_carries_the_plans_epochs_target_and_threads(until_target):
    line = torchrun_command(plan_choice(until_target=until_target), "builtin:digits")
    assert line.startswith("OMP_NUM_THREADS=3 torchrun ")
    assert " --epochs 12.4 " in line + " " and "--epochs 1000" not in line  # rounded up, 3 digits
    assert ("--until-target" in line) == until_target
    assert "--global-batch 256" in line and "--nproc-per-node=4" in line and "--nnodes=2" in line


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp"])
def test_gpu_lines_train_at_the_planned_precision_and_cpu_lines_at_the_default(precision):
    """Mutation caught: dropping `--precision` from _train_args (a T4 plan at amp, 34.6 min, would
    train at fp32, 2.06 h), or adding it to CPU lines (their step time is the fp32 profile's)."""
    gpu = plan_choice(precision=precision)
    for text in (torchrun_command(gpu, "builtin:digits"), skypilot_task(gpu, "builtin:digits")["run"]):
        assert shlex.split(text.replace("\\\n", " ")).count("--precision") == 1
        assert f" --precision {precision} " in text + " "
    cpu = plan_choice(**CPU_ONE_NODE)
    for text in (torchrun_command(cpu, "builtin:digits"), skypilot_task(cpu, "builtin:digits")["run"]):
        assert "--precision" not in text


def _train_arguments(text: str) -> list[str]:
    """The words after `-m thrifty.train` in a launch line or a run section."""
    words = shlex.split(text.replace("\\\n", " "))
    return words[words.index(launch.TRAIN_MODULE) + 1:]


@pytest.mark.parametrize("changes", [
    CPU_ONE_NODE, {**CPU_ONE_NODE, "until_target": True, "nodes": 2, "workers": 4, "spot": False},
    {}, {"precision": "tf32"}, {"precision": "fp32"}],
    ids=["cpu-1-node-spot", "cpu-2-nodes-target", "gpu-amp", "gpu-tf32", "gpu-fp32"])
def test_thrifty_train_itself_parses_the_launch_lines(changes):
    """The launch lines' train arguments, parsed by the `thrifty train` command itself: every
    option exists and every value parses to what the plan chose. Mutation caught: an option that
    thrifty train does not have (`--epoch`, or `--precision` before it exists), a value it reads
    otherwise (epochs in exponent form)."""
    import typer

    from thrifty.cli.train import train
    app = typer.Typer()
    app.command()(train)
    command = typer.main.get_command(app)
    choice = plan_choice(**changes)
    for text in (torchrun_command(choice, "builtin:digits"), skypilot_task(choice, "builtin:digits")["run"]):
        params = command.make_context("thrifty train", _train_arguments(text)).params
        assert (params["workload"], params["global_batch"], params["epochs"], params["until_target"]) == \
            ("builtin:digits", choice["global_batch"], float(epochs_text(choice["epochs"])), choice["until_target"])
        if choice["accelerator"]:
            assert params["precision"] == choice["precision"]
    # the same line run again continues its run (the torchrun line, an on-demand task); a spot
    # task's THRIFTY_CHECKPOINT_DIR implies as much (mutation caught: the flag on no line, or on
    # the spot task too)
    task = skypilot_task(choice, "builtin:digits")
    lines = [command.make_context("thrifty train", _train_arguments(text)).params
             for text in (torchrun_command(choice, "builtin:digits"), task["run"])]
    assert [line["resume_if_any"] for line in lines] == [True, not choice["spot"]]
    assert ("envs" in task) == choice["spot"]
    # in a run directory of the plan's own (a review: in the shared default folder a second plan's
    # line continued the first plan's run at its own batch; mutation caught: no --run-dir)
    own = Path(launch.RUNS_FOLDER) / run_folder(choice, "builtin:digits")
    assert lines[0]["run_dir"] == own and (lines[1]["run_dir"] == own) != choice["spot"]
    other = torchrun_command({**choice, "global_batch": choice["global_batch"] * 2}, "builtin:digits")
    assert command.make_context("thrifty train", _train_arguments(other)).params["run_dir"] != own


def test_epochs_are_printed_plainly_and_never_rounded_down():
    assert [epochs_text(e) for e in (90.0, 12.3, 12.301, 0.0123, 1234.5, 3)] == \
        ["90", "12.3", "12.4", "0.0123", "1235", "3"]


def test_single_node_line_needs_no_head_address(tmp_path):
    line = torchrun_command(plan_choice(**CPU_ONE_NODE), "builtin:digits")
    assert "--standalone" in line and "HEAD_IP" not in line and "--epochs 90 " in line + " "
    env = {**os.environ, "PATH": f"{fake_bin(tmp_path)}:{os.environ['PATH']}"}
    env.pop("HEAD_IP", None)
    done = _bash(line, env, tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("torchrun OMP_NUM_THREADS=2 --standalone")


def test_multi_node_line_takes_the_head_address_from_the_environment(tmp_path):
    line = torchrun_command(plan_choice(), "builtin:digits")
    env = {**os.environ, "PATH": f"{fake_bin(tmp_path)}:{os.environ['PATH']}"}
    env.pop("HEAD_IP", None)
    missing = _bash(line, env, tmp_path)
    assert missing.returncode != 0 and "export HEAD_IP" in missing.stderr and missing.stdout == ""
    done = _bash(line, {**env, "HEAD_IP": "10.0.0.5"}, tmp_path)
    assert done.returncode == 0 and "--rdzv-endpoint=10.0.0.5:29500" in done.stdout
    assert "OMP_NUM_THREADS=3 " in done.stdout


@pytest.mark.parametrize("key", ["threads_per_rank", "epochs", "until_target", "precision"])
def test_a_missing_plan_key_is_an_error(key):
    choice = plan_choice()
    del choice[key]
    with pytest.raises(KeyError):
        torchrun_command(choice, "builtin:digits")
    with pytest.raises(KeyError):
        skypilot_yaml(choice, "builtin:digits")


# --- SkyPilot task ---

def _pip_installs(setup: str) -> list[list[str]]:
    return [shlex.split(line.split("#")[0])[2:] for line in setup.splitlines()
            if line.strip().startswith("pip install")]


@pytest.mark.parametrize("changes, workload", [({}, "OUTSIDE"), (CPU_ONE_NODE, "builtin:digits"),
                                               ({"cloud": "aws", "instance_type": "g4dn.12xlarge",
                                                 "region": "us-east-1", "spot": False}, "builtin:tabular")])
def test_skypilot_yaml_uses_only_documented_keys_and_runs_from_synced_source(changes, workload, tmp_path):
    if workload == "OUTSIDE":  # a user's workload file outside the project
        workload = str(tmp_path / "my_net.py")
        Path(workload).write_text("def make_workload(): ...\n")
    choice = plan_choice(**changes)
    task = yaml.safe_load(skypilot_yaml(choice, workload))
    assert set(task) <= TASK_KEYS and set(task["resources"]) <= RESOURCE_KEYS
    assert {"workdir", "setup", "run", "resources", "num_nodes"} <= set(task)
    assert task["num_nodes"] == choice["nodes"] and task["resources"]["use_spot"] is choice["spot"]
    assert Path(task["workdir"]) == project_root() and (Path(task["workdir"]) / "pyproject.toml").is_file()
    assert all(Path(local).is_file() for local in task.get("file_mounts", {}).values() if isinstance(local, str))
    installs = _pip_installs(task["setup"])
    assert ["-e", ".[train]"] in installs  # thrifty from the synced source, with what training needs ...
    assert not any(arg.split("=")[0] == "thrifty" for args in installs for arg in args)  # ... not PyPI
    is_cpu = choice["accelerator"] is None
    assert any("--index-url" in args and args[args.index("--index-url") + 1].endswith("/cpu")
               for args in installs) == is_cpu
    run = task["run"]
    assert all(f"${var}" in run for var in SKYPILOT_VARS)
    assert run.index('HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)') < run.index("$HEAD_IP")
    assert ("$SKYPILOT_NUM_GPUS_PER_NODE" in run) == (not is_cpu)
    assert f"OMP_NUM_THREADS={choice['threads_per_rank']} torchrun" in run
    assert f"--epochs {epochs_text(choice['epochs'])}" in run
    assert ("--until-target" in run) == choice["until_target"]
    assert ("accelerators" in task["resources"]) == (choice["cloud"] == "gcp" and not is_cpu)


def test_a_workload_file_runs_from_where_skypilot_puts_it(tmp_path):
    for local in (tmp_path / "elsewhere" / "my_net.py", project_root() / ".thrifty" / "my_net.py"):
        made = not local.exists()  # the file exists, as a planned workload's does (its code names the run folder)
        local.parent.mkdir(parents=True, exist_ok=True)
        if made:
            local.write_text("# a workload file\n")
        try:
            task = skypilot_task(plan_choice(spot=False), str(local))  # the second: in the checkout, git-ignored
        finally:
            if made:
                local.unlink()
        assert task["file_mounts"] == {"~/thrifty-workload/my_net.py": str(local)}
        assert "--workload ~/thrifty-workload/my_net.py " in task["run"] and str(local) not in task["run"]
    task = skypilot_task(plan_choice(spot=False), "builtin:digits")
    assert "file_mounts" not in task and "--workload builtin:digits " in task["run"]


def test_a_workload_files_modules_and_packages_beside_it_are_mounted_with_it(tmp_path):
    """What job.py may import from its folder reaches the VM (only job.py had: `from mynet import ...`
    failed there), and nothing else (a secrets.py in a home folder). Mutations caught: the file mounted
    alone; every .py beside it mounted."""
    (tmp_path / "job.py").write_text("from mynet import make_workload\n")
    (tmp_path / "mynet.py").write_text("import torch\nfrom layers.conv import block\nimport nsp.net\n")  # and theirs
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "__init__.py").write_text("")
    (tmp_path / "layers" / "conv.py").write_text("import numpy\n")
    (tmp_path / "layers" / "old.py").symlink_to(tmp_path / "gone.py")  # dangling, imported by nothing: no refusal
    (tmp_path / "nsp").mkdir()  # a namespace package (no __init__.py): Python imports it, so it goes along
    (tmp_path / "nsp" / "net.py").write_text("x = 1\n")
    (tmp_path / "secrets.py").write_text("TOKEN = 'x'\n")  # beside it, imported by nothing: stays here
    (tmp_path / "data").mkdir()  # a folder that is no package stays behind
    (tmp_path / "data" / "big.bin").write_bytes(b"0" * 10)
    task = skypilot_task(plan_choice(spot=False), str(tmp_path / "job.py"))
    assert task["file_mounts"] == {"~/thrifty-workload/job.py": str(tmp_path / "job.py"),
                                   "~/thrifty-workload/layers": str(tmp_path / "layers"),
                                   "~/thrifty-workload/mynet.py": str(tmp_path / "mynet.py"),
                                   "~/thrifty-workload/nsp": str(tmp_path / "nsp")}
    from thrifty.workloads import workload_key
    assert workload_key(str(tmp_path / "job.py"))  # the dangling link is no file to hash


def test_without_a_source_checkout_the_installed_package_is_mounted(monkeypatch):
    import thrifty
    monkeypatch.setattr(launch, "project_root", lambda: None)  # as if installed from a wheel
    task = yaml.safe_load(skypilot_yaml(plan_choice(spot=False), "builtin:digits"))
    assert "workdir" not in task and set(task) <= TASK_KEYS
    assert task["file_mounts"] == {"~/thrifty-src/thrifty": str(Path(thrifty.__file__).parent)}
    installs = _pip_installs(task["setup"])
    assert ["-e", "."] not in installs and training_requirements() in installs  # thrifty's own dependencies
    assert not any(arg.split("=")[0].split(">")[0] == "thrifty" for args in installs for arg in args)
    assert "export PYTHONPATH=~/thrifty-src" in task["run"]


def test_a_training_vm_installs_the_core_and_the_train_extra_only(monkeypatch):
    """Mutation caught: keeping every extra's requirements (OpenMM and Ray on every training VM),
    or dropping the train extra's (no torch)."""
    declared = ["numpy>=1.24", 'tomli>=2; python_version < "3.11"', 'torch>=2.4; extra == "train"',
                'openmm>=8.1; extra == "md"',
                'ray<3,>=2.9; extra == "campaign"', 'pytest>=8; extra == "test"']
    monkeypatch.setattr(launch.metadata, "requires", lambda name: declared if name == "thrifty" else None)
    assert training_requirements() == ["numpy>=1.24", 'tomli>=2; python_version < "3.11"', "torch>=2.4"]
    monkeypatch.setattr(launch, "project_root", lambda: None)
    (thrifty_install,) = [args for args in _pip_installs(skypilot_task(plan_choice(), "builtin:digits")["setup"])
                          if "numpy>=1.24" in args]
    assert thrifty_install == training_requirements()
    assert not {"openmm", "ray", "pytest"} & {arg.split("<")[0].split(">")[0] for arg in thrifty_install}


def test_a_planning_install_without_torch_still_writes_a_task(monkeypatch):
    """Mutation caught: the torch pin read from an installed torch unguarded (a planning-only
    install of thrifty, which has no torch, would fail to print any task)."""
    def version(name):
        raise launch.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(launch.metadata, "version", version)
    installs = _pip_installs(skypilot_task(plan_choice(**CPU_ONE_NODE), "builtin:digits")["setup"])
    assert ["torch", "numpy", "--index-url", launch.CPU_TORCH_INDEX] in installs


def test_skypilot_run_section_runs_with_skypilots_variables(tmp_path):
    outside = tmp_path / "my_net.py"
    outside.write_text("def make_workload(): ...\n")
    task = yaml.safe_load(skypilot_yaml(plan_choice(), str(outside)))
    assert subprocess.run(["bash", "-n", "-c", task["setup"]], timeout=30).returncode == 0  # syntax
    env = {**os.environ, "PATH": f"{fake_bin(tmp_path)}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "SKYPILOT_NODE_IPS": "10.0.0.5\n10.0.0.6", "SKYPILOT_NODE_RANK": "1",
           "SKYPILOT_NUM_NODES": "2", "SKYPILOT_NUM_GPUS_PER_NODE": "4"}
    done = _bash(task["run"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    (called,) = [line for line in done.stdout.splitlines() if line.startswith("torchrun ")]
    for part in ("OMP_NUM_THREADS=3 ", "--nnodes=2 ", "--nproc-per-node=4 ", "--node-rank=1 ",
                 "--master-addr=10.0.0.5 ", f"--workload {tmp_path}/thrifty-workload/my_net.py ",
                 "--epochs 12.4 "):
        assert part in called + " ", part


# --- the printed torchrun line, run here, reaches the profiled speed ---

def _run_line(command: str, env: dict, cwd: Path) -> dict:
    proc = subprocess.Popen(["bash", "-c", command], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"the torchrun line did not finish in 240 s: {command}")
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


@pytest.mark.timeout(300)
def test_printed_torchrun_line_runs_its_configuration_on_its_threads(tmp_path):
    """The printed line runs as printed: its ranks, its global batch, and the threads per rank the
    step-time model assumed, even in a shell that exports more (here, 2 ranks on 2 vCPUs with
    OMP_NUM_THREADS=2 ran at 0.08-0.19 of the profiled speed: plan.launch). Mutations caught: the
    OMP_NUM_THREADS prefix dropped (the ranks take the shell's threads), or the line's batch flags
    lost (another global batch)."""
    if not socket.gethostbyname(socket.getfqdn()).startswith("127."):
        pytest.skip("torchrun --standalone would use this host's non-loopback address")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "torchrun").is_file(), "torchrun is not installed next to this Python"
    choice = plan_choice(**{**CPU_ONE_NODE, "global_batch": 128, "threads_per_rank": 1})
    line = torchrun_command(choice, "builtin:digits")
    assert line.startswith("OMP_NUM_THREADS=1 torchrun --standalone ")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GLOO_SOCKET_IFNAME": "lo",
           "MASTER_ADDR": "127.0.0.1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
           "OMP_NUM_THREADS": str(max(2, os.cpu_count() or 2))}
    run_dir = tmp_path / "run"
    summary = _run_line(f"{line} --steps 5 --eval-every 1000 --checkpoint-every 0 "
                        f"--run-dir {run_dir} --db {tmp_path / 'train.db'} --json", env, tmp_path)
    assert (summary["steps"], summary["workers"], summary["global_batch"]) == (5, 2, 128)
    assert summary["threads_per_rank"] == 1
    assert {r.rank for r in RunLog.read(run_dir).steps} == {0, 1}
