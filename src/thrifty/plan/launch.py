# SPDX-License-Identifier: MIT
"""Commands that launch a chosen configuration: a torchrun line and a SkyPilot task YAML.

Both run `python -m thrifty.train` (= `thrifty train`) with the plan's global batch, its epochs,
`--until-target` only where the workload has a real target, on GPUs the precision the prediction
assumed (`--precision`), and OMP_NUM_THREADS set to the threads per rank that the step-time
prediction assumed. torchrun sets it only for several ranks a node and only where the shell has
not: here, 2 ranks on 2 vCPUs in a shell with OMP_NUM_THREADS=2 ran at 0.08-0.19 of the profiled
samples/s (tests/test_launch.py).

A spot plan's task is a SkyPilot managed job (`sky jobs launch`): SkyPilot starts it again on new
VMs after a preemption (`resources.job_recovery`), setup and run included. Its checkpoints go to
a bucket that every node mounts (plan.bucket), in the plan's own folder, named by
THRIFTY_CHECKPOINT_DIR: there `thrifty train` writes its checkpoints (rank 0) and resumes from the
newest intact one when the folder holds one, so the restarted task continues where the last
checkpoint, or the last SIGTERM notice (train.preemption), left it. An on-demand plan's task is a
plain cluster (`sky launch`) that checkpoints to its run directory on the head node, and its
training line, like the torchrun line, carries `--resume-if-any`: launched again on the same
cluster (after a crash, a stop, a `sky launch` retried), it continues from that checkpoint.

`choice` is `PlanResult.describe(i)`; a missing key is a bug and raises KeyError.
"""

import json
import math
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import thrifty
from thrifty.catalog.torch_cuda import installed_torch
from thrifty.errors import PlanError
from thrifty.plan.bucket import MOUNT_PATH, bucket_mount, default_bucket_name, run_folder
from thrifty.transient.protocol import ENV_DIR
from thrifty.workloads.names import canonical_name, workload_sources

TRAIN_MODULE = "thrifty.train"
RUNS_FOLDER = ".thrifty/runs"  # where a plan's launch line keeps its run directory (thrifty train's default's parent)
RDZV_PORT = 29500
# SkyPilot (docs.skypilot.co, "YAML spec" and "distributed jobs"): `workdir` is synced to
# ~/sky_workdir on every node and setup/run start there; `file_mounts` maps a remote path to a
# local one; every node's run sees SKYPILOT_NODE_IPS (one IP a line, the head first),
# SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES and SKYPILOT_NUM_GPUS_PER_NODE.
WORKLOAD_MOUNT = "~/thrifty-workload"
CONDA_ENV = "thrifty"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
TRAIN_EXTRA = "train"  # thrifty[train]: what a training VM installs besides the planning core
# SkyPilot managed jobs (docs.skypilot.co, "Managed jobs"; `job_recovery` in sky/utils/schemas.py):
# a preemption is always recovered; FAILOVER retries the same region (the plan's price is that
# region's) before others; a run that fails while its VMs are up (a node's crash, or a notice whose
# checkpoint-and-exit beat the cloud's report of the preemption) is started again at most
# MAX_RESTARTS_ON_ERRORS times, each from the newest checkpoint, before the job counts as failed.
RECOVERY_STRATEGY = "FAILOVER"
MAX_RESTARTS_ON_ERRORS = 3


def epochs_text(epochs: float) -> str:
    """The plan's epochs rounded up to 3 significant digits, never in exponent form."""
    if not (isinstance(epochs, (int, float)) and math.isfinite(epochs) and epochs > 0):
        raise PlanError(f"the plan's epochs must be a positive number, got {epochs!r}")
    decimals = max(0, 2 - math.floor(math.log10(epochs)))
    scale = 10 ** decimals
    rounded = math.ceil(epochs * scale * (1 - 1e-12)) / scale  # 1e-12: float noise, not a digit
    text = f"{rounded:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _ranks_per_node(choice: dict) -> int:
    nodes, workers = choice["nodes"], choice["workers"]
    if nodes < 1 or workers < nodes or workers % nodes:
        raise PlanError(f"{workers} workers do not split evenly over {nodes} node(s)")
    return workers // nodes


def _train_args(choice: dict, workload: str, workload_arg: str, *, resume_if_any: bool) -> str:
    """`-m thrifty.train ...`; workload_arg is already shell-quoted. CPUs train at thrifty train's
    default precision, fp32, what their step time was measured at. `resume_if_any`: the same line
    run again continues from its run directory's checkpoint (an on-demand task relaunched, a
    torchrun line typed again after a crash) instead of being refused for it, in a run directory
    of the plan's own (.thrifty/runs/ + plan.bucket.run_folder: another plan's line, another batch
    or workload, starts its own run, where the shared default folder had it continue this one's);
    a spot task's THRIFTY_CHECKPOINT_DIR implies as much."""
    args = (f"-m {TRAIN_MODULE} --workload {workload_arg} --global-batch {choice['global_batch']} "
            f"--epochs {epochs_text(choice['epochs'])}")
    if choice["accelerator"]:
        args += f" --precision {choice['precision']}"
    if choice["until_target"]:
        args += " --until-target"
    if resume_if_any:
        args += f" --run-dir {RUNS_FOLDER}/{run_folder(choice, workload)} --resume-if-any"
    return args


def _threads(choice: dict) -> int:
    threads = choice["threads_per_rank"]
    if not (isinstance(threads, int) and threads >= 1):
        raise PlanError(f"threads_per_rank must be a positive integer, got {threads!r}")
    return threads


def torchrun_command(choice: dict, workload: str) -> str:
    """The line to run on every node. One node: `--standalone` (a local rendezvous, nothing to
    set). Several: export HEAD_IP = the first node's address on every node first."""
    nproc, nodes = _ranks_per_node(choice), choice["nodes"]
    if nodes == 1:
        rendezvous = "--standalone --nnodes=1"
    else:
        rendezvous = (f"--nnodes={nodes} --rdzv-backend=c10d --rdzv-id=thrifty "
                      f"--rdzv-endpoint=${{HEAD_IP:?export HEAD_IP=the first node address}}:{RDZV_PORT}")
    workload_arg = shlex.quote(canonical_name(workload))
    return (f"OMP_NUM_THREADS={_threads(choice)} torchrun {rendezvous} --nproc-per-node={nproc} "
            f"{_train_args(choice, workload, workload_arg, resume_if_any=True)}")


def project_root() -> Path | None:
    """The source checkout thrifty runs from (src layout: ROOT/src/thrifty), or None for a wheel."""
    root = Path(thrifty.__file__).resolve().parents[2]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and 'name = "thrifty"' in pyproject.read_text(encoding="utf-8"):
        return root
    return None


def _synced_workload(workload: str) -> tuple[str, dict[str, str]]:
    """The workload argument as the VM sees it, and the file_mounts it needs (remote: local).
    A workload file is always mounted: one inside the checkout may be git-ignored, and SkyPilot
    leaves ignored files out of the workdir. The Python modules and packages beside it go along
    (workloads.names.workload_sources: what it may import, as `python FILE` would)."""
    name = canonical_name(workload)
    if name.startswith("builtin:"):
        return name, {}
    local = Path(name)
    mounts = {f"{WORKLOAD_MOUNT}/{source.name}": str(source) for source in workload_sources(local)}
    return f"{WORKLOAD_MOUNT}/{shlex.quote(local.name)}", mounts


def _torch_pin() -> str:
    """The torch version that profiled the job; any torch where thrifty plans without one (its
    planning core, from a profile stored elsewhere). Its CUDA build sets the GPUs a plan offers
    (catalog.torch_cuda)."""
    version = installed_torch()
    return "torch" if version is None else f"torch=={version}"


def training_requirements() -> list[str]:
    """thrifty's requirements that a training VM installs: the core's and the `train` extra's,
    not those of the other extras (MD, campaigns); the extra's marker is dropped."""
    kept = []
    for requirement in metadata.requires("thrifty") or []:
        spec, _, marker = requirement.partition(";")
        if "extra ==" not in marker:
            kept.append(requirement)
        elif marker.strip() == f'extra == "{TRAIN_EXTRA}"':
            kept.append(spec.strip())
    return kept


def _setup_script(choice: dict, root: Path | None) -> list[str]:
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    lines = [f"conda env list | grep -q '^{CONDA_ENV} ' || conda create -y -n {CONDA_ENV} "
             f"--override-channels -c conda-forge python={python}",
             f"conda activate {CONDA_ENV}"]
    if choice["accelerator"]:
        lines.append("# GPU VM: the default PyPI torch wheel is the CUDA build")
        lines.append(f"pip install '{_torch_pin()}' numpy")
    else:
        lines.append("# CPU VM: the CPU-only torch wheel (no CUDA libraries to download)")
        lines.append(f"pip install '{_torch_pin()}' numpy --index-url {CPU_TORCH_INDEX}")
    if root is not None:
        lines.append(f"pip install -e '.[{TRAIN_EXTRA}]'  # thrifty from the synced source (workdir)")
    else:  # an installed wheel: its package directory is mounted, its requirements installed here
        lines.append("pip install " + " ".join(shlex.quote(r) for r in training_requirements()))
    return lines


def skypilot_task(choice: dict, workload: str, root: Path | None = None, bucket: str | None = None) -> dict:
    """The SkyPilot task as a dict (keys of SkyPilot's YAML spec); `root` defaults to the
    checkout thrifty runs from, `bucket` (a spot plan's checkpoints) to default_bucket_name()."""
    root = root if root is not None else project_root()
    workload_arg, synced = _synced_workload(workload)
    mounts: dict[str, Any] = dict(synced)  # paths, and a spot plan's bucket (a dict of its own)
    if root is None:  # no checkout: mount the installed package and import it from there
        mounts["~/thrifty-src/thrifty"] = str(Path(thrifty.__file__).resolve().parent)
    spot = bool(choice["spot"])
    if spot:
        mounts[MOUNT_PATH] = bucket_mount(choice["cloud"], bucket or default_bucket_name())
    resources: dict[str, Any] = {"cloud": choice["cloud"], "region": choice["region"],
                 "instance_type": choice["instance_type"]}
    if choice["accelerator"] and choice["cloud"] == "gcp":  # GCP attaches GPUs to a host type
        resources["accelerators"] = f"{choice['accelerator']}:{choice['accelerator_count']}"
    resources["use_spot"] = spot
    if spot:
        resources["job_recovery"] = {"strategy": RECOVERY_STRATEGY, "max_restarts_on_errors": MAX_RESTARTS_ON_ERRORS}
    nproc = _ranks_per_node(choice)
    per_node = "$SKYPILOT_NUM_GPUS_PER_NODE" if choice["accelerator"] and \
        nproc == choice["accelerator_count"] else str(nproc)
    run = [f"conda activate {CONDA_ENV}",
           "HEAD_IP=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)"]
    if root is None:
        run.append("export PYTHONPATH=~/thrifty-src${PYTHONPATH:+:$PYTHONPATH}")
    run += [f"OMP_NUM_THREADS={_threads(choice)} torchrun --nnodes=$SKYPILOT_NUM_NODES "
            f"--nproc-per-node={per_node} --node-rank=$SKYPILOT_NODE_RANK "
            f"--master-addr=$HEAD_IP --master-port={RDZV_PORT} \\",
            f"  {_train_args(choice, workload, workload_arg, resume_if_any=not spot)}"]
    task: dict[str, Any] = {"name": "thrifty-train"}
    if root is not None:
        task["workdir"] = str(root)
    if mounts:
        task["file_mounts"] = mounts
    task.update({"resources": resources, "num_nodes": choice["nodes"]})
    if spot:  # sky jobs launch --env THRIFTY_CHECKPOINT_DIR=... gives the run another folder
        task["envs"] = {ENV_DIR: f"{MOUNT_PATH}/{run_folder(choice, workload)}"}
    task.update({"setup": "\n".join(_setup_script(choice, root)) + "\n", "run": "\n".join(run) + "\n"})
    return task


_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9_./:-]*")  # a YAML plain scalar that stays a string
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _scalar(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and text.lower() not in _YAML_WORDS and not text.endswith(":"):
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def _render(mapping: dict, indent: str = "") -> list[str]:
    lines = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{_scalar(key)}:")
            lines += _render(value, indent + "  ")
        elif isinstance(value, str) and "\n" in value:
            lines.append(f"{indent}{_scalar(key)}: |")
            lines += [f"{indent}  {line}" for line in value.rstrip("\n").split("\n")]
        else:
            lines.append(f"{indent}{_scalar(key)}: {_scalar(value)}")
    return lines


def _header(task: dict) -> list[str]:
    if not task["resources"]["use_spot"]:
        return ["# SkyPilot task from `thrifty plan`; launch with: sky launch -c thrifty task.yaml"]
    bucket = task["file_mounts"][MOUNT_PATH]["name"]
    return ["# SkyPilot managed job from `thrifty plan`; launch with: sky jobs launch -n thrifty task.yaml",
            "# Spot VMs: after a preemption SkyPilot starts the job again, and training resumes from",
            f"# the newest checkpoint in {ENV_DIR} (envs, below) on bucket {bucket},",
            f"# which outlives the job (delete it with: sky storage delete {bucket}).",
            f"# A fresh run in another folder: sky jobs launch --env {ENV_DIR}={MOUNT_PATH}/OTHER ..."]


def skypilot_yaml(choice: dict, workload: str, root: Path | None = None, bucket: str | None = None) -> str:
    """A SkyPilot task (https://docs.skypilot.co), a managed job for a spot plan; its header comment
    says how to launch it."""
    task = skypilot_task(choice, workload, root, bucket)
    return "\n".join(_header(task) + _render(task)) + "\n"
