"""Commands that launch a chosen configuration: a torchrun line and a SkyPilot task YAML.

Both run `python -m thrifty.train` (= `thrifty train`) with the plan's global batch, its epochs,
`--until-target` only where the workload has a real target, and OMP_NUM_THREADS set to the threads
per rank that the step-time prediction assumed. torchrun sets it only for several ranks a node and
only where the shell has not: here, 2 ranks on 2 vCPUs in a shell with OMP_NUM_THREADS=2 ran at
0.08-0.19 of the profiled samples/s (tests/test_launch.py).

`choice` is `PlanResult.describe(i)`; a missing key is a bug and raises KeyError.
"""

import json
import math
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path

import thrifty
from thrifty.errors import PlanError
from thrifty.workloads.names import canonical_name

TRAIN_MODULE = "thrifty.train"
RDZV_PORT = 29500
# SkyPilot (docs.skypilot.co, "YAML spec" and "distributed jobs"): `workdir` is synced to
# ~/sky_workdir on every node and setup/run start there; `file_mounts` maps a remote path to a
# local one; every node's run sees SKYPILOT_NODE_IPS (one IP a line, the head first),
# SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES and SKYPILOT_NUM_GPUS_PER_NODE.
WORKLOAD_MOUNT = "~/thrifty-workload"
CONDA_ENV = "thrifty"
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


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


def _train_args(choice: dict, workload_arg: str) -> str:
    """`-m thrifty.train ...`; workload_arg is already shell-quoted."""
    args = (f"-m {TRAIN_MODULE} --workload {workload_arg} --global-batch {choice['global_batch']} "
            f"--epochs {epochs_text(choice['epochs'])}")
    return args + " --until-target" if choice["until_target"] else args


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
            f"{_train_args(choice, workload_arg)}")


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
    leaves ignored files out of the workdir."""
    name = canonical_name(workload)
    if name.startswith("builtin:"):
        return name, {}
    local = Path(name)
    remote = f"{WORKLOAD_MOUNT}/{local.name}"
    return f"{WORKLOAD_MOUNT}/{shlex.quote(local.name)}", {remote: str(local)}


def _torch_pin() -> str:
    return "torch==" + metadata.version("torch").split("+")[0]  # the version that was profiled


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
        lines.append("pip install -e .  # thrifty from the synced source (workdir)")
    else:  # an installed wheel: its package directory is mounted, its requirements installed here
        requirements = " ".join(shlex.quote(r) for r in metadata.requires("thrifty") or []
                                if "extra ==" not in r)
        lines.append(f"pip install {requirements}")
    return lines


def skypilot_task(choice: dict, workload: str, root: Path | None = None) -> dict:
    """The SkyPilot task as a dict (keys of SkyPilot's YAML spec); `root` defaults to the
    checkout thrifty runs from."""
    root = root if root is not None else project_root()
    workload_arg, mounts = _synced_workload(workload)
    if root is None:  # no checkout: mount the installed package and import it from there
        mounts["~/thrifty-src/thrifty"] = str(Path(thrifty.__file__).resolve().parent)
    resources = {"cloud": choice["cloud"], "region": choice["region"],
                 "instance_type": choice["instance_type"]}
    if choice["accelerator"] and choice["cloud"] == "gcp":  # GCP attaches GPUs to a host type
        resources["accelerators"] = f"{choice['accelerator']}:{choice['accelerator_count']}"
    resources["use_spot"] = bool(choice["spot"])
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
            f"  {_train_args(choice, workload_arg)}"]
    task = {"name": "thrifty-train"}
    if root is not None:
        task["workdir"] = str(root)
    if mounts:
        task["file_mounts"] = mounts
    task.update({"resources": resources, "num_nodes": choice["nodes"],
                 "setup": "\n".join(_setup_script(choice, root)) + "\n", "run": "\n".join(run) + "\n"})
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


def _render(task: dict) -> list[str]:
    lines = []
    for key, value in task.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines += [f"  {_scalar(k)}: {_scalar(v)}" for k, v in value.items()]
        elif isinstance(value, str) and "\n" in value:
            lines.append(f"{key}: |")
            lines += [f"  {line}" for line in value.rstrip("\n").split("\n")]
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return lines


def skypilot_yaml(choice: dict, workload: str, root: Path | None = None) -> str:
    """A SkyPilot task (https://docs.skypilot.co): `sky launch -c thrifty task.yaml`."""
    header = ["# SkyPilot task from `thrifty plan`; launch with: sky launch -c thrifty task.yaml"]
    return "\n".join(header + _render(skypilot_task(choice, workload, root))) + "\n"
