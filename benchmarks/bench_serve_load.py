# SPDX-License-Identifier: MIT
"""`thrifty serve` under load: CLIENTS concurrent clients for SECONDS against a database that a
running search writes, on loopback.

A writer process runs sim searches (thrifty.search.session.run_search, a synthetic 60-configuration
trace) one seed after another into the database, timing every window's write
(thrifty.store.Store.save_search_window: the probe row and checkpoint in one transaction) from
the call to its commit. `thrifty serve --db` runs as its own process; the clients (asyncio +
httpx, each one request at a time) cycle through the API: health, the search list, the newest
search's windows, plans, profiles and runs. First the writer runs alone for BASELINE seconds (what
a write takes on this machine with no reader), then with the clients. Reported: requests, failed
requests (any status but 200, or no answer), latency percentiles (p50, p99, max), and the writes'
duration (p99, max) alone and under load; the goal is no failed request and no write over 100 ms.
Absolute times depend on the machine's load (recorded: the load average before and after); compare
the two phases' writes side by side. Run:
    PYTHONPATH=src python benchmarks/bench_serve_load.py [--clients 50] [--seconds 30]
"""

import argparse
import asyncio
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from common import save_figure, write_result

WRITE_GOAL_S = 0.100


def _writer(db: str, seconds: float, out: str) -> None:
    """Sim searches into `db` for `seconds`; every window's write duration to `out` (npy)."""
    from thrifty.search.config import Config
    from thrifty.search.harness import Scenario, cheapest_start
    from thrifty.search.noise_schedule import NoiseSchedule
    from thrifty.search.rule import Objective
    from thrifty.search.session import run_search
    from thrifty.search.synthetic import VMSpec, synthetic_trace
    from thrifty.store import Store

    durations: list[tuple[float, float]] = []

    class TimedStore(Store):
        def save_search_window(self, *args, **kwargs) -> None:
            began = time.perf_counter()
            super().save_search_window(*args, **kwargs)
            durations.append((time.time(), time.perf_counter() - began))

    rows = synthetic_trace([VMSpec("small", 0.2, 1.0), VMSpec("mid", 0.4, 2.2), VMSpec("big", 0.8, 3.0)],
                           [1, 2, 4, 8], [64, 128, 256, 512, 1024])
    scenario = Scenario(rows, NoiseSchedule.constant(500.0, 2e7), Objective("cost"))
    start: Config = cheapest_start({r.config: r.price_per_hour for r in rows})
    ends = time.monotonic() + seconds
    seed = 0
    with TimedStore(db) as store:
        store.conn.execute("PRAGMA journal_mode = WAL")  # as thrifty serve sets it: both phases write in WAL
        while time.monotonic() < ends:
            run_search(scenario, seed, start, store)
            seed += 1
    np.save(out, np.array(durations))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _client(http, base: str, ends: float, latencies: list, failures: list) -> None:
    paths = ["/api/health", "/api/searches", None, "/api/plans", "/api/profiles", "/api/runs"]
    newest = None
    i = 0
    while time.monotonic() < ends:
        path = paths[i % len(paths)] or (f"/api/searches/{newest}" if newest else "/api/searches")
        i += 1
        began = time.perf_counter()
        try:
            response = await http.get(base + path)
            ok = response.status_code == 200
            if ok and path == "/api/searches" and response.json():
                newest = response.json()[0]["id"]
        except Exception as exc:  # any failure to answer counts
            ok, response = False, exc
        latencies.append(time.perf_counter() - began)
        if not ok:
            failures.append(f"{path}: {getattr(response, 'status_code', response)!r}")


async def _load(base: str, clients: int, seconds: float) -> tuple[list, list]:
    import httpx
    latencies: list[float] = []
    failures: list[str] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as http:
        ends = time.monotonic() + seconds  # from here: making the client (its TLS context) takes seconds
        await asyncio.gather(*(_client(http, base, ends, latencies, failures) for _ in range(clients)))
    return latencies, failures


def _serve(db: Path, port: int) -> subprocess.Popen:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "serve", "--db", str(db), "--port", str(port)],
                            env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2).read()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"thrifty serve failed: {proc.stderr.read()}") from None
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("thrifty serve did not start")


def _writes(path: Path) -> np.ndarray:
    return np.load(path) if path.exists() else np.zeros((0, 2))


def main(clients: int = 50, seconds: float = 30.0, baseline_s: float = 10.0) -> dict:
    ctx = mp.get_context("spawn")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        tmp = Path(tmp)
        db = tmp / "thrifty.db"
        alone = ctx.Process(target=_writer, args=(str(db), baseline_s, str(tmp / "alone.npy")))
        alone.start()
        alone.join()
        port = _free_port()
        server = _serve(db, port)  # the database exists now (the baseline's searches); serve puts it in WAL
        try:
            loaded = ctx.Process(target=_writer, args=(str(db), seconds, str(tmp / "loaded.npy")))
            loaded.start()
            latencies, failures = asyncio.run(_load(f"http://127.0.0.1:{port}", clients, seconds))
            loaded.join()
        finally:
            server.terminate()
            server.wait(30)
        write_alone, write_loaded = _writes(tmp / "alone.npy"), _writes(tmp / "loaded.npy")
    lat = np.array(latencies)
    result = {
        "clients": clients, "seconds": seconds, "requests": len(lat), "failed_requests": len(failures),
        "failures_first": failures[:5], "requests_per_s": len(lat) / seconds,
        "latency_p50_s": float(np.percentile(lat, 50)), "latency_p99_s": float(np.percentile(lat, 99)),
        "latency_max_s": float(lat.max()),
        "writes_alone": len(write_alone), "write_alone_p99_s": float(np.percentile(write_alone[:, 1], 99)),
        "write_alone_max_s": float(write_alone[:, 1].max()),
        "writes_under_load": len(write_loaded),
        "write_under_load_p99_s": float(np.percentile(write_loaded[:, 1], 99)),
        "write_under_load_max_s": float(write_loaded[:, 1].max()),
        "writes_over_100ms_under_load": int(np.sum(write_loaded[:, 1] > WRITE_GOAL_S)),
        # the machine's 1-minute load average (runnable processes) before and after, over its cores
        "load_average_before": load_before, "load_average_after": os.getloadavg()[0], "cores": os.cpu_count(),
        "goal_met": bool(not failures and write_loaded[:, 1].max() <= WRITE_GOAL_S),
    }
    print({k: v for k, v in result.items() if k != "failures_first"})
    write_result("bench_serve_load", result)
    _figure(lat, write_alone[:, 1], write_loaded[:, 1], result)
    return result


def _figure(lat: np.ndarray, alone: np.ndarray, loaded: np.ndarray, result: dict) -> None:
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    a.hist(lat * 1000, bins=60, color="tab:blue")
    a.axvline(result["latency_p99_s"] * 1000, color="red", label=f"p99 {result['latency_p99_s'] * 1000:.0f} ms")
    a.set_xlabel("request latency (ms)")
    a.set_ylabel("requests")
    a.set_title(f"{result['clients']} clients, {result['requests']:,} requests, {result['failed_requests']} failed")
    a.legend()
    for data, label in ((alone, "writer alone"), (loaded, f"with {result['clients']} clients")):
        b.plot(np.sort(data) * 1000, np.linspace(0, 1, len(data)), label=f"{label} (max {data.max() * 1000:.1f} ms)")
    b.axvline(WRITE_GOAL_S * 1000, color="grey", ls="--", label="100 ms")
    b.set_xscale("log")
    b.set_xlabel("one window's write, call to commit (ms)")
    b.set_ylabel("share of writes")
    b.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, "bench_serve_load")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--baseline", type=float, default=10.0)
    args = parser.parse_args()
    main(args.clients, args.seconds, args.baseline)
