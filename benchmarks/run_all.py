"""Run every benchmark in turn; each writes JSON and PNG under benchmarks/results/."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_asp  # noqa: E402
import bench_cpu_scaling  # noqa: E402
import bench_faults  # noqa: E402
import bench_gpu_projection  # noqa: E402
import bench_hetero  # noqa: E402
import bench_noise_overhead  # noqa: E402
import bench_optimizer  # noqa: E402
import bench_preempt  # noqa: E402
import bench_search  # noqa: E402
import bench_search_local  # noqa: E402
import bench_startup  # noqa: E402
import bench_stateff  # noqa: E402
import bench_steptime  # noqa: E402

if __name__ == "__main__":
    for run in (bench_startup.main, bench_optimizer.main, bench_gpu_projection.main, bench_cpu_scaling.main,
                bench_steptime.main, bench_noise_overhead.main, bench_stateff.main, bench_hetero.main,
                bench_hetero.main_reaction, bench_asp.main, bench_preempt.main, bench_faults.main,
                bench_search.main, bench_search_local.main):
        print(f"== {run.__module__}.{run.__name__}", flush=True)
        run()
    print("results in benchmarks/results/")
