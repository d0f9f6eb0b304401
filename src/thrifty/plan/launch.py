"""Commands that launch a chosen configuration: a torchrun line and a SkyPilot task YAML."""

import shlex

from thrifty.workloads.registry import canonical_name

TRAIN_MODULE = "thrifty.train"


def _train_args(workload: str, global_batch: int) -> str:
    return f"-m {TRAIN_MODULE} --workload {shlex.quote(canonical_name(workload))} " \
           f"--global-batch {global_batch} --until-target --epochs 1000"


def torchrun_command(choice: dict, workload: str) -> str:
    """The torchrun line to run on every node (HEAD_IP = the first node's address)."""
    nproc = choice["workers"] // choice["nodes"]
    rendezvous = "" if choice["nodes"] == 1 else \
        " --rdzv-backend=c10d --rdzv-endpoint=$HEAD_IP:29500 --rdzv-id=thrifty"
    return (f"torchrun --nnodes={choice['nodes']} --nproc-per-node={nproc}{rendezvous} "
            f"{_train_args(workload, choice['global_batch'])}")


def skypilot_yaml(choice: dict, workload: str) -> str:
    """A SkyPilot task (https://docs.skypilot.co) that provisions and runs the configuration."""
    lines = ["name: thrifty-train", "resources:", f"  cloud: {choice['cloud']}",
             f"  region: {choice['region']}", f"  instance_type: {choice['instance_type']}"]
    if choice.get("accelerator") and choice["cloud"] == "gcp":  # GCP attaches GPUs to a host type
        lines.append(f"  accelerators: {choice['accelerator']}:{choice['accelerator_count']}")
    nproc = choice["workers"] // choice["nodes"]
    lines += [f"  use_spot: {'true' if choice['spot'] else 'false'}",
              f"num_nodes: {choice['nodes']}",
              "setup: |",
              "  pip install torch thrifty",
              "run: |",
              "  HEAD_IP=$(echo \"$SKYPILOT_NODE_IPS\" | head -n1)",
              f"  torchrun --nnodes=$SKYPILOT_NUM_NODES --nproc-per-node={nproc} "
              "--node-rank=$SKYPILOT_NODE_RANK --master-addr=$HEAD_IP --master-port=29500 \\",
              f"    {_train_args(workload, choice['global_batch'])}"]
    return "\n".join(lines) + "\n"
