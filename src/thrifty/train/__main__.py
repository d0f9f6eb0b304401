"""`python -m thrifty.train`: data-parallel training to the target metric, launched by torchrun.

Reads RANK, WORLD_SIZE and LOCAL_RANK from torchrun's environment; local batches are B / n (the
remainder goes to the first ranks). This is the command `thrifty plan` prints for its choice.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

from thrifty.errors import ThriftyError
from thrifty.train.loop import train_to_target
from thrifty.workloads import DEFAULT_WORKLOAD, load_workload


def even_split(global_batch: int, workers: int) -> list[int]:
    base, extra = divmod(global_batch, workers)
    return [base + (1 if k < extra else 0) for k in range(workers)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thrifty.train")
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD)
    parser.add_argument("--global-batch", type=int, required=True)
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--target", type=float, default=None)
    args = parser.parse_args(argv)
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    try:
        if world > 1:
            if torch.cuda.is_available():
                torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        if args.global_batch < world:
            raise ThriftyError(f"global batch {args.global_batch} is smaller than {world} workers")
        workload = load_workload(args.workload)
        result = train_to_target(workload, even_split(args.global_batch, world), rank=rank,
                                 max_steps=args.max_steps, target=args.target)
    except ThriftyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if rank == 0:
        print(json.dumps({"steps": result.steps, "reached_target": result.reached_target,
                          workload.metric_name: result.final_metric,
                          "wall_time_s": round(result.wall_time_s, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
