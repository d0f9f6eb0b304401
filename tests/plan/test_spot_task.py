# SPDX-License-Identifier: MIT
"""A spot plan's SkyPilot task is a managed job whose checkpoints live in a bucket that every node
mounts, in the plan's own folder; an on-demand plan's stays a plain cluster. SkyPilot's own task
loader reads every task `thrifty plan` writes."""

import json
import socket
from pathlib import Path

import pytest
import yaml
from launch_choices import CPU_ONE_NODE, plan_choice

from thrifty.errors import PlanError
from thrifty.plan.bucket import MOUNT_PATH, STORES, check_bucket_name, default_bucket_name, run_folder
from thrifty.plan.launch import MAX_RESTARTS_ON_ERRORS, project_root, skypilot_task, skypilot_yaml
from thrifty.transient.protocol import ENV_DIR

AWS_GPU = {"cloud": "aws", "region": "us-east-1", "instance_type": "g4dn.12xlarge"}
AWS_CPU_TWO_NODES = {**CPU_ONE_NODE, "cloud": "aws", "region": "us-east-1", "instance_type": "c5.2xlarge",
                     "nodes": 2, "workers": 4}
AZURE_GPU = {"cloud": "azure", "region": "eastus", "instance_type": "Standard_NC24ads_A100_v4",
             "accelerator": "A100-80GB", "accelerator_count": 1, "nodes": 1, "workers": 1}


def _header(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith("#"))


@pytest.mark.parametrize("changes", [{}, AWS_GPU, AWS_CPU_TWO_NODES, AZURE_GPU],
                         ids=["gcp-gpu-2-nodes", "aws-gpu", "aws-cpu-2-nodes", "azure-gpu"])
def test_a_spot_plan_is_a_managed_job_that_checkpoints_to_a_mounted_bucket(changes):
    """Mutations caught: `sky launch` in the header (an unmanaged cluster nothing restarts), no
    job_recovery, no bucket in file_mounts or another store or mode, no THRIFTY_CHECKPOINT_DIR in
    envs or one outside the bucket's mount (checkpoints on the VM's own disk)."""
    choice = plan_choice(**changes)
    text = skypilot_yaml(choice, "builtin:digits", bucket="team-ckpts")
    task = yaml.safe_load(text)
    assert "sky jobs launch -n thrifty task.yaml" in _header(text) and "sky launch" not in _header(text)
    assert task["resources"]["use_spot"] is True
    assert task["resources"]["job_recovery"] == {"strategy": "FAILOVER",
                                                 "max_restarts_on_errors": MAX_RESTARTS_ON_ERRORS}
    assert task["file_mounts"][MOUNT_PATH] == {"name": "team-ckpts", "store": STORES[choice["cloud"]],
                                               "mode": "MOUNT"}
    assert task["envs"] == {ENV_DIR: f"{MOUNT_PATH}/{run_folder(choice, 'builtin:digits')}"}
    assert "team-ckpts" in _header(text) and ENV_DIR in _header(text)


def test_an_on_demand_plan_stays_a_plain_cluster_that_checkpoints_locally():
    """Mutation caught: a bucket, envs or job_recovery on an on-demand task (a bucket it does not
    need, and `sky launch` ignores job_recovery), or its header saying `sky jobs launch`."""
    text = skypilot_yaml(plan_choice(spot=False), "builtin:digits")
    task = yaml.safe_load(text)
    assert "sky launch -c thrifty task.yaml" in _header(text) and "jobs" not in _header(text)
    assert "file_mounts" not in task and "envs" not in task and "job_recovery" not in task["resources"]


def test_the_bucket_is_the_users_choice_or_a_default_that_every_cloud_accepts():
    """Mutations caught: --bucket ignored, a default with the user's name unchecked (capitals,
    dots, underscores) or changing from one plan to the next, a bad name let through."""
    assert skypilot_task(plan_choice(), "builtin:digits", bucket="my-ckpts")["file_mounts"][MOUNT_PATH]["name"] \
        == "my-ckpts"
    default = default_bucket_name()
    assert default == default_bucket_name() and default.startswith("thrifty-ckpt-")
    assert check_bucket_name(default) == default
    assert skypilot_task(plan_choice(), "builtin:digits")["file_mounts"][MOUNT_PATH]["name"] == default
    for bad in ("My-Ckpts", "ab", "a--b", "-ab", "ab-", "a.b", "a_b", "goog-ckpts", "x" * 64):
        with pytest.raises(PlanError, match="bucket name"):
            check_bucket_name(bad)
    assert check_bucket_name("x" * 63) == "x" * 63


def test_an_unknown_cloud_leaves_the_store_to_skypilot():
    mount = skypilot_task(plan_choice(cloud="lambda"), "builtin:digits", bucket="my-ckpts")["file_mounts"][MOUNT_PATH]
    assert mount == {"name": "my-ckpts", "mode": "MOUNT"}


def test_each_plan_trains_in_its_own_folder_of_the_bucket(tmp_path):
    """Mutations caught: one folder for every run (a fresh run would clear another's checkpoints,
    or resume from them), a folder that changes between two prints of the same plan (a relaunch
    would not find its checkpoints), or one that ignores the workload's code."""
    folder = run_folder(plan_choice(), "builtin:digits")
    assert folder == run_folder(plan_choice(), "builtin:digits") and folder.startswith("digits-")
    others = {run_folder(plan_choice(**change), "builtin:digits")
              for change in ({"global_batch": 512}, {"precision": "fp32"}, {"nodes": 1, "workers": 4},
                             {"instance_type": "n1-standard-8"}, {"epochs": 20.0})}
    assert len(others) == 5 and folder not in others
    assert run_folder(plan_choice(), "builtin:tabular") != folder
    # a re-plan whose epochs differ in the 15th digit (another machine's arithmetic) is the same plan
    # (a review: it started a new folder; mutation caught: the raw float hashed)
    assert run_folder(plan_choice(epochs=4.535512693963798), "builtin:digits") == \
        run_folder(plan_choice(epochs=4.535512693963799), "builtin:digits")
    net = tmp_path / "My_Net.py"
    net.write_text("def make_workload(): ...\n")
    before = run_folder(plan_choice(), str(net))
    net.write_text("def make_workload(): return None\n")
    assert run_folder(plan_choice(), str(net)) != before and before.startswith("my-net-")


def test_thrifty_plan_prints_the_task_with_the_bucket_it_is_given(run_cli, profiled_db, tmp_path):
    """Mutations caught: cli/plan.py not passing --bucket on to the SkyPilot task; printing the
    task as rich markup, which eats the `[train]` of `pip install -e '.[train]'`."""
    args = ("plan", "--db", profiled_db, "--spot", "only", "--bucket", "team-ckpts", "--plot", tmp_path / "plan.png")
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    summary = json.loads(out)
    text = summary["launch"]["skypilot_yaml"]
    task = yaml.safe_load(text)
    assert task["file_mounts"][MOUNT_PATH]["name"] == "team-ckpts"
    assert task["envs"][ENV_DIR] == f"{MOUNT_PATH}/{run_folder(summary['recommended'], 'builtin:digits')}"
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert text in out and "pip install -e '.[train]'" in text


# --- SkyPilot's own loader ---

@pytest.fixture()
def no_network(monkeypatch):
    """Fail any connection or name lookup that is not loopback (SkyPilot fetches catalogs)."""
    real_connect, real_lookup = socket.socket.connect, socket.getaddrinfo

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else ""
        if isinstance(address, tuple) and not (host.startswith("127.") or host in ("::1", "localhost")):
            raise AssertionError(f"network access to {address} during a test")
        return real_connect(self, address)

    def lookup(host, *args, **kwargs):
        if host not in (None, "localhost") and not str(host).startswith("127."):
            raise AssertionError(f"name lookup of {host} during a test")
        return real_lookup(host, *args, **kwargs)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", lookup)


def _parsed_by_skypilot(sky, text: str) -> dict:
    """What SkyPilot's own loader made of the YAML, as plain values: a Task's repr (pytest shows it
    when an assertion fails) looks up SkyPilot's online catalog, so no Task leaves this function;
    nor is a VM type's GPU asked for where the task names none (that is a catalog look-up too)."""
    config = yaml.safe_load(text)
    names_gpus = "accelerators" in config["resources"]
    task = sky.Task.from_yaml_config(config)  # takes the dict apart
    (resources,) = task.resources
    storage = {path: (s.name, s.mode.value, sorted(store.value for store in s.stores))
               for path, s in (task.storage_mounts or {}).items()}
    return {"num_nodes": task.num_nodes, "workdir": task.workdir, "file_mounts": task.file_mounts or {},
            "storage": storage, "envs": dict(task.envs), "instance_type": resources.instance_type,
            "cloud": str(resources.cloud).lower(), "use_spot": resources.use_spot,
            "job_recovery": resources.job_recovery,
            "accelerators": resources.accelerators if names_gpus else None,
            "setup": task.setup, "run": task.run}


TASKS = [({}, "FILE"), ({**CPU_ONE_NODE}, "builtin:digits"), ({"spot": False}, "builtin:digits"),
         ({**AWS_GPU}, "builtin:tabular"), ({**AWS_GPU, "spot": False}, "FILE"), (AWS_CPU_TWO_NODES, "FILE"),
         ({**CPU_ONE_NODE, "spot": False, "nodes": 2, "workers": 4}, "builtin:digits"), (AZURE_GPU, "builtin:digits")]


@pytest.mark.parametrize("changes, workload", TASKS, ids=[
    "gcp-gpu-2-nodes-spot-file", "gcp-cpu-spot", "gcp-gpu-2-nodes-on-demand", "aws-gpu-2-nodes-spot",
    "aws-gpu-2-nodes-on-demand-file", "aws-cpu-2-nodes-spot-file", "gcp-cpu-2-nodes-on-demand", "azure-gpu-spot"])
def test_skypilots_own_loader_reads_every_task_as_planned(changes, workload, tmp_path, no_network, monkeypatch):
    """SkyPilot validates the YAML against its task schema (and the bucket against its storage
    schema) while loading. Mutations caught: a misspelt key (`jobs_recovery`), a store or mode
    SkyPilot does not know, a bucket mount it reads as a local path, envs it drops."""
    monkeypatch.setenv("HOME", str(tmp_path))  # SkyPilot keeps its state under ~/.sky
    sky = pytest.importorskip("sky", reason="skypilot is not installed here (it is in thrifty's test extra)")
    if workload == "FILE":
        workload = str(tmp_path / "my_net.py")
        Path(workload).write_text("def make_workload(): ...\n")
    choice = plan_choice(**changes)
    task = _parsed_by_skypilot(sky, skypilot_yaml(choice, workload, bucket="team-ckpts"))
    assert (task["num_nodes"], task["cloud"], task["instance_type"], task["use_spot"]) == \
        (choice["nodes"], choice["cloud"], choice["instance_type"], choice["spot"])
    assert task["workdir"] == str(project_root())
    gpus = {choice["accelerator"]: choice["accelerator_count"]} if choice["accelerator"] else None
    assert task["accelerators"] == (gpus if choice["cloud"] == "gcp" else None)  # elsewhere: the VM type's
    assert task["file_mounts"] == ({"~/thrifty-workload/my_net.py": workload} if workload.endswith(".py") else {})
    if choice["spot"]:
        assert task["storage"] == {MOUNT_PATH: ("team-ckpts", "MOUNT", [STORES[choice["cloud"]].upper()])}
        assert task["envs"] == {ENV_DIR: f"{MOUNT_PATH}/{run_folder(choice, workload)}"}
        assert task["job_recovery"] == {"strategy": "FAILOVER", "max_restarts_on_errors": MAX_RESTARTS_ON_ERRORS}
    else:
        assert (task["storage"], task["envs"], task["job_recovery"]) == ({}, {}, None)
    assert "SKYPILOT_NODE_IPS" in task["run"] and "pip install -e '.[train]'" in task["setup"]
