# SPDX-License-Identifier: MIT
"""A spot plan's SkyPilot task survives its VMs. Its run section runs here as SkyPilot runs it
(the task's envs, SKYPILOT_* variables, one working folder and home per VM) on loopback, with a
folder of tmp_path as the bucket; killed or warned mid-run, and run again on "new VMs" (fresh
working folders: only the bucket carries over), it resumes from the newest checkpoint in the bucket
and ends with the parameters of an uninterrupted run (a SkyPilot managed job restarts setup and run
the same way after a preemption). An on-demand plan's task, launched again on its cluster (the
same working folder), continues the same way from its run directory."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_choices import CPU_ONE_NODE, fake_bin, plan_choice

from thrifty.checkpoint_file import load_state
from thrifty.plan.bucket import MOUNT_PATH, run_folder
from thrifty.plan.launch import RDZV_PORT, RUNS_FOLDER, skypilot_task
from thrifty.train.launcher import free_loopback_port
from thrifty.train.trainer import TrainConfig, run_training
from thrifty.transient.protocol import ENV_DIR, checkpoint_files

STEPS = 40
# what the test adds to the task's training line: a short run that two runs repeat bit for bit
# (the uniform split: the dynamic policy's split follows measured times), no memory probe; 40
# steps leave 30 or more after the kill or the notice below (tens of milliseconds each)
SHORT_RUN = f"--steps {STEPS} --eval-every 1000 --policy uniform --b-max 64 --json"
SMALL_CPU_PLAN = {**CPU_ONE_NODE, "threads_per_rank": 1, "global_batch": 64}


VM_MARKER = "THRIFTY_TEST_VM"


def _processes_of(vm: Path) -> list[int]:
    """Every live process started on this "VM" (all inherit its marker variable): torchrun starts
    its ranks in sessions of their own, so no process group holds them all."""
    marker = f"{VM_MARKER}={vm}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # ended meanwhile, or not ours
            continue
    return pids


class Cluster:
    """The task's run section on `nodes` loopback "VMs" that share one bucket folder."""

    def __init__(self, task: dict, bucket: Path, vms: Path, extra: str) -> None:
        run = task["run"]
        assert run.count(f"--master-port={RDZV_PORT}") == 1
        # a free port instead of the task's fixed one: tests run in parallel
        self.script = run.replace(f"--master-port={RDZV_PORT}", f"--master-port={free_loopback_port()}")
        self.script = self.script.rstrip("\n") + f" {extra}\n"  # the training line is the last one
        self.nodes, self.vms = task["num_nodes"], vms
        self.env = {key: value for key, value in os.environ.items() if key != ENV_DIR}
        self.env.update({key: value.replace(MOUNT_PATH, str(bucket), 1) for key, value in task.get("envs", {}).items()})
        self.folder = Path(self.env[ENV_DIR]) if ENV_DIR in self.env else None  # a spot plan's folder in the bucket
        self.env.update({"PATH": f"{fake_bin(vms, quiet=True)}:{Path(sys.executable).parent}:{os.environ['PATH']}",
                         "GLOO_SOCKET_IFNAME": "lo", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
                         "PYTHONUNBUFFERED": "1", "SKYPILOT_NODE_IPS": "\n".join(["127.0.0.1"] * self.nodes),
                         "SKYPILOT_NUM_NODES": str(self.nodes)})
        self.procs: list[subprocess.Popen] = []
        self.node_vms: list[Path] = []

    def start(self, attempt: str) -> None:
        """Every node's run section, each in the working folder, also its home, of `attempt`'s VM
        (a new one for a new name; the same one, as `sky launch` on a cluster that is up, for a
        name used before)."""
        self.procs, self.node_vms = [], [self.vms / f"{attempt}-node{rank}" for rank in range(self.nodes)]
        for rank, vm in enumerate(self.node_vms):
            vm.mkdir(parents=True, exist_ok=True)
            env = {**self.env, "SKYPILOT_NODE_RANK": str(rank), VM_MARKER: str(vm), "HOME": str(vm)}
            self.procs.append(subprocess.Popen(["bash", "-c", self.script], cwd=vm, env=env, text=True,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE))

    def signal_node(self, rank: int, signum: int) -> None:
        """To every process of the node, as when its VM goes away (a shutdown signals them all)."""
        for pid in _processes_of(self.node_vms[rank]):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def wait(self, timeout_s: float = 300) -> list[tuple[int, str, str]]:
        """Every node's (exit code, stdout, stderr); whatever is left of a node is killed after."""
        outputs = []
        try:
            for proc in self.procs:
                out, err = proc.communicate(timeout=timeout_s)
                outputs.append((proc.returncode, out, err))
        finally:
            for rank in range(self.nodes):
                self.signal_node(rank, signal.SIGKILL)
        return outputs

    def finish(self, attempt: str) -> dict:
        """Run to the end; rank 0's summary (node 0 holds rank 0)."""
        self.start(attempt)
        outputs = self.wait()
        assert [code for code, _, _ in outputs] == [0] * self.nodes, [err[-3000:] for _, _, err in outputs]
        return json.loads(outputs[0][1])


def _wait_for(condition, procs: list[subprocess.Popen], what: str, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if any(proc.poll() is not None for proc in procs):
            pytest.fail(f"a node ended before {what}: {[proc.communicate()[1][-3000:] for proc in procs]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {timeout_s} s")
        time.sleep(0.02)


def _step(checkpoint: Path) -> int:
    return load_state(checkpoint)["step"]


@pytest.fixture(scope="module")
def reference_digests(tmp_path_factory) -> list[str]:
    """The parameters of an uninterrupted SHORT_RUN, trained in-process on two local ranks: what
    both tasks' two ranks (on one node or two, the same split) end with when nothing stops them."""
    config = TrainConfig(workload="builtin:digits", workers=2, global_batch=64, policy="uniform", b_max=64,
                         steps=STEPS, eval_every=1000, checkpoint_every=0, progress=False, timeout_s=240,
                         run_dir=tmp_path_factory.mktemp("reference"))
    return run_training(config)["parameter_digests"]


@pytest.mark.timeout(900)
def test_a_task_killed_mid_run_resumes_from_the_newest_checkpoint_in_the_bucket(tmp_path, reference_digests):
    """Mutations caught: a task without THRIFTY_CHECKPOINT_DIR in its envs (checkpoints on the
    VM's own disk, gone with it; KeyError here), the variable not implying a resume
    (train.checkpoint.choose_checkpoint: a fresh start, resumed_at_step None), a restart that
    clears the folder or does not take its newest checkpoint; tried: a restore that drops the
    sampler's position (train.checkpoint.restore setting sample_offset to 0: the digests differ)."""
    task = skypilot_task(plan_choice(**SMALL_CPU_PLAN), "builtin:digits")
    extra = f"{SHORT_RUN} --checkpoint-every 5"
    cluster = Cluster(task, tmp_path / "bucket", tmp_path / "vms", extra)
    cluster.start("first")
    _wait_for(lambda: cluster.folder.is_dir() and checkpoint_files(cluster.folder), cluster.procs,
              "checkpoint in the bucket")
    cluster.signal_node(0, signal.SIGKILL)  # the VM is gone: no notice, nothing runs on
    cluster.wait()
    newest = _step(checkpoint_files(cluster.folder)[-1])
    assert 5 <= newest < STEPS, "the run ended before it was killed: nothing to resume"
    resumed = cluster.finish("restarted")
    assert resumed["resumed_at_step"] == newest
    assert resumed["parameter_digests"] == reference_digests


@pytest.mark.timeout(900)
def test_a_notice_to_one_node_saves_a_checkpoint_and_every_node_resumes_from_it(tmp_path, reference_digests):
    """Two nodes, one rank each; the SIGTERM of the node without rank 0 (a spot VM's notice)
    reaches its rank through torchrun. Mutations caught: no SIGTERM handler under torchrun
    (train.preemption.notice_on_sigterm: the rank dies, rank 0 loses its peer and no checkpoint is
    saved, with --checkpoint-every 0 none before the end), a notice counted on rank 0 only
    (AgreedSignals: node 1's notice is never agreed on, torchrun kills its rank 30 s later; tried
    with 40 steps: node 0 then hangs until Cluster.wait's 300 s run out)."""
    task = skypilot_task(plan_choice(**{**SMALL_CPU_PLAN, "nodes": 2, "workers": 2}), "builtin:digits")
    extra = f"{SHORT_RUN} --checkpoint-every 0 --step-stream steps.jsonl"  # node 0's folder
    cluster = Cluster(task, tmp_path / "bucket", tmp_path / "vms", extra)
    cluster.start("first")
    stream = tmp_path / "vms" / "first-node0" / "steps.jsonl"
    _wait_for(lambda: stream.is_file() and len(stream.read_text().splitlines()) >= 5, cluster.procs,
              "five steps")
    cluster.signal_node(1, signal.SIGTERM)
    (code0, _, err0), _ = cluster.wait()
    assert code0 != 0 and "preempted after step" in err0, err0[-3000:]
    (saved,) = checkpoint_files(cluster.folder)  # the notice's, and no other
    assert 5 <= _step(saved) < STEPS
    resumed = cluster.finish("restarted")
    assert resumed["resumed_at_step"] == _step(saved)
    assert resumed["parameter_digests"] == reference_digests


@pytest.mark.timeout(900)
def test_an_on_demand_task_launched_again_on_its_cluster_continues_its_run(tmp_path, reference_digests):
    """`sky launch` of an on-demand plan's task again on its cluster (the run died: a crash, a
    stop) runs the task in the same working folder, whose run directory holds its checkpoints.
    Mutation caught: the task's training line without --resume-if-any (plan.launch._train_args:
    the second launch refused, "holds an earlier run's checkpoints")."""
    choice = plan_choice(**{**SMALL_CPU_PLAN, "spot": False})
    task = skypilot_task(choice, "builtin:digits")
    cluster = Cluster(task, tmp_path / "bucket", tmp_path / "vms", f"{SHORT_RUN} --checkpoint-every 5")
    assert cluster.folder is None  # no bucket: the checkpoints stay on the head node, in the plan's own run folder
    cluster.start("cluster")
    run_dir = cluster.node_vms[0] / RUNS_FOLDER / run_folder(choice, "builtin:digits")
    _wait_for(lambda: run_dir.is_dir() and checkpoint_files(run_dir), cluster.procs, "checkpoint in the run directory")
    cluster.signal_node(0, signal.SIGKILL)
    cluster.wait()
    newest = _step(checkpoint_files(run_dir)[-1])
    assert 5 <= newest < STEPS, "the run ended before it was killed: nothing to resume"
    resumed = cluster.finish("cluster")
    assert resumed["resumed_at_step"] == newest
    assert resumed["parameter_digests"] == reference_digests
