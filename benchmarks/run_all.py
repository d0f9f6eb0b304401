"""Run every benchmark in turn; each writes JSON and PNG under benchmarks/results/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_asp  # noqa: E402
import bench_faults  # noqa: E402
import bench_hetero  # noqa: E402
import bench_noise_overhead  # noqa: E402
import bench_optimizer  # noqa: E402
import bench_preempt  # noqa: E402
import bench_stateff  # noqa: E402
import bench_steptime  # noqa: E402

if __name__ == "__main__":
    for module in (bench_optimizer, bench_steptime, bench_noise_overhead, bench_stateff, bench_hetero,
                   bench_asp, bench_preempt, bench_faults):
        print(f"== {module.__name__}", flush=True)
        module.main()
    print("results in benchmarks/results/")
