# SPDX-License-Identifier: MIT
"""Process groups, in one place: n local worker processes joined on loopback
(`run_local_workers`), or this process as one rank of a torchrun launch (`torchrun_group`).

Gloo on CPU (`GLOO_SOCKET_IFNAME=lo`, `MASTER_ADDR=127.0.0.1` locally), NCCL when the ranks train
on GPUs (the backend follows the rank's device, train.runtime). Every local run has a hard timeout; a rank that raises stops the run with its error message
(once, without a rank, when every rank stopped with the same ThriftyError: a collective decision).
Local workers die with the launcher (train.lifeline), so killing it leaves none behind; what they
log reaches the launcher's loggers (train.worker_logs).

Local workers are forked from a forkserver (multiprocessing's) that has imported torch,
torch._dynamo (which every torch optimizer imports on creation) and the trainer once: a rank
starts in milliseconds instead of re-importing them for seconds, and a process that launches
many runs (the search, the tests) pays the imports once. A forked rank takes the launcher's
environment as it is at the launch, as a spawned one would (the server's is from its start).
"""

import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import timedelta
from multiprocessing import forkserver
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from thrifty.errors import ThriftyError, WorkloadError
from thrifty.train.lifeline import die_with
from thrifty.train.runtime import backend_for, resolve_device
from thrifty.train.worker_logs import relayed_worker_logs, send_logs_to_launcher

RankFunction = Callable[..., Any]


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loopback_store(rank: int, world: int, port: int, timeout: timedelta | None = None) -> dist.TCPStore:
    """The ranks' rendezvous store on 127.0.0.1:`port`, listening there alone: a store made from
    `tcp://127.0.0.1:PORT` listens on every interface (torch's server binds the wildcard address
    whatever the host), so rank 0 binds the socket itself and hands it over (`master_listen_fd`)."""
    from torch.distributed.constants import default_pg_timeout
    timeout = timeout or default_pg_timeout
    if rank != 0:
        return dist.TCPStore("127.0.0.1", port, world, False, timeout)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(max(world, 128))
    except OSError:
        listener.close()
        raise
    fd = listener.detach()
    try:
        return dist.TCPStore("127.0.0.1", port, world, True, timeout, master_listen_fd=fd)
    except Exception:
        os.close(fd)
        raise


LOOPBACK_SCHEME = "thrifty-loopback"  # init_method scheme of loopback_store (process groups and torch.distributed.rpc)


def loopback_init_method(port: int) -> str:
    """An init_method whose rendezvous is loopback_store on `port` (the handler registered once)."""
    from torch.distributed import rendezvous as rendezvous_module
    registered = getattr(rendezvous_module, "_rendezvous_handlers", {})
    if LOOPBACK_SCHEME not in registered:
        dist.register_rendezvous_handler(LOOPBACK_SCHEME, _loopback_rendezvous)
    return f"{LOOPBACK_SCHEME}://127.0.0.1:{port}"


def _loopback_rendezvous(url: str, timeout: timedelta | None = None, **_: Any) -> Iterator[tuple[dist.Store, int, int]]:
    """torch.distributed's rendezvous protocol (as its tcp:// handler): the store, rank and world size
    from the url's query, which torch fills in."""
    parsed = urlparse(url)
    query = dict(parse_qsl(parsed.query))
    if parsed.port is None or "rank" not in query or "world_size" not in query:
        raise ValueError(f"{LOOPBACK_SCHEME}:// rendezvous needs a port, rank and world_size: {url}")
    rank, world = int(query["rank"]), int(query["world_size"])
    yield loopback_store(rank, world, parsed.port, timeout), rank, world
    raise RuntimeError(f"{LOOPBACK_SCHEME}:// cannot rendezvous again")


def launched_by_torchrun() -> bool:
    return "TORCHELASTIC_RUN_ID" in os.environ or ("RANK" in os.environ and "WORLD_SIZE" in os.environ)


def exit_without_teardown(code: int) -> NoReturn:
    """End a torchrun rank whose work is done and written: flush, then leave without the interpreter's
    teardown, where gloo's threads sometimes abort the process ("terminate called without an
    active exception", seen about once in 15 runs), which torchrun would report as a failed rank."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _join_group(device: str | None, local_rank: int, **init) -> None:
    """Join the process group with the backend for this rank's device (train.runtime): NCCL for
    a GPU (made this process's current device first), gloo for the CPU."""
    where = resolve_device(device, local_rank)
    if where.type == "cuda":
        torch.cuda.set_device(where)
    dist.init_process_group(backend_for(where), **init)


@contextlib.contextmanager
def torchrun_group(device: str | None = None):
    """(rank, world size) of this torchrun process, inside its process group when world > 1 (the
    rendezvous comes from torchrun's environment); the group is destroyed on the way out.
    `device` as `thrifty train --device` (None: cuda:LOCAL_RANK where CUDA is)."""
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    if world > 1:
        _join_group(device, int(os.environ.get("LOCAL_RANK", 0)))
    try:
        yield rank, world
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# imported once by the forkserver, before it forks any rank: the heavy part of a rank's start
PRELOAD = ["torch", "torch._dynamo", "torch.distributed", "thrifty.train.trainer", "thrifty.train.asp",
           "matplotlib.figure", "matplotlib.backends.backend_agg",  # rank 0 plots the run
           "thrifty.train.quick_exit"]  # last: the server's exit skips the teardown of the others
_CONTEXT = mp.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


def start_worker_server() -> None:
    """Start the forkserver now: it imports PRELOAD on another core while this process goes on
    (the CLI's dry run), so the ranks launched later fork at once. Idempotent.

    The server starts with SIGTERM ignored (a disposition it keeps across exec): a SIGTERM to the
    whole process group (a VM's shutdown, `timeout`) had ended it under the live ranks, whose exit
    codes then read as 255 ("rank 0 died") while they were saving their notice checkpoint. It ends
    with this process anyway (its pipe closes). Its ranks inherit the ignored SIGTERM; a training
    rank counts it as a notice (train.preemption), and every rank dies with its launcher. SIGINT
    too: a terminal's Ctrl-C reaches the whole group, and is the launcher's to act on (a stop, or
    under `thrifty run` the notice every rank saves on); the server and its ranks had died of it
    with KeyboardInterrupt tracebacks, so under the runner nothing was saved."""
    if threading.current_thread() is not threading.main_thread():
        forkserver.ensure_running()
        return
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        forkserver.ensure_running()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def _rank_main(rank: int, world: int, port: int, threads: int, process_group: bool, out_dir: str,
               launcher: int, environment: dict[str, str], device: str | None, logs: tuple[Any, int],
               fn: RankFunction, kwargs: dict[str, Any]) -> None:
    die_with(launcher)
    send_logs_to_launcher(*logs, rank=rank)
    os.environ.clear()
    os.environ.update(environment)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("TP_SOCKET_IFNAME", "lo")  # asp's RPC (TensorPipe): else the hostname's address
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["LOCAL_RANK"], os.environ["LOCAL_WORLD_SIZE"] = str(rank), str(world)  # as torchrun sets them
    torch.set_num_threads(threads)
    result_file = Path(out_dir) / f"rank{rank}.json"
    try:
        if world > 1 and process_group:
            _join_group(device, rank, init_method=loopback_init_method(port), rank=rank, world_size=world)
        result = fn(rank=rank, world_size=world, **kwargs)
        payload = {"ok": True, "result": result}
    except Exception as exc:
        payload = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "failed_at": time.time(),
                   "message": str(exc) if isinstance(exc, ThriftyError) else None,
                   "traceback": traceback.format_exc()}
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    tmp = result_file.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(payload))
        tmp.replace(result_file)
    except FileNotFoundError:  # the launcher stopped waiting (Ctrl-C) and removed the folder: no one reads it
        raise SystemExit(1) from None
    if not payload["ok"]:
        raise SystemExit(1)


def _succeeded(out_dir: str, rank: int) -> bool:
    path = Path(out_dir) / f"rank{rank}.json"
    try:
        return bool(json.loads(path.read_text())["ok"])
    except (OSError, ValueError, KeyError):
        return False


def _exit_reason(exitcode: int) -> str:
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def act_as(handler: Any, kind: signal.Signals) -> None:
    """What a signal's earlier disposition does with it: call it, or the default action (ending the
    process), or nothing (ignored)."""
    if callable(handler):
        handler(kind, None)
    elif handler != signal.SIG_IGN:  # SIG_DFL, or None (not set from Python): the default
        signal.signal(kind, signal.SIG_DFL)
        signal.raise_signal(kind)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the end of the block, then act as they would have (the handler
    they met: an exception, or the default ending the process). Blocking them in this thread is not
    enough: another thread (the log relay's) takes the signal, and Python runs its handler here.
    Once the block has ended the collecting handler acts as the one it replaced: a Ctrl-C landing
    between the two restores runs the restored handler at once, and its exception skips the other
    restore, which had left SIGTERM collected for good."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; other threads get no signals' exceptions
        return
    caught: list[signal.Signals] = []
    ended = threading.Event()

    def collect(signum: int, frame: Any) -> None:
        kind = signal.Signals(signum)
        if ended.is_set():
            act_as(previous[kind], kind)
        else:
            caught.append(kind)

    previous = {kind: signal.signal(kind, collect) for kind in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        ended.set()
        for kind, handler in previous.items():
            signal.signal(kind, handler if handler is not None else signal.SIG_DFL)
        for kind in dict.fromkeys(caught):  # each signal that came, in order, once
            act_as(previous[kind], kind)


def run_local_workers(fn: RankFunction, world_size: int, *, timeout_s: float,
                      threads_per_rank: int = 1, process_group: bool = True, device: str | None = None,
                      **kwargs: Any) -> list[Any]:
    """Run fn(rank=, world_size=, **kwargs) on world_size forked processes; return rank results.

    With process_group=False the ranks get MASTER_ADDR/MASTER_PORT but set up their own
    communication (torch.distributed.rpc). `device` picks each rank's device and with it the
    backend (train.runtime: None = cuda:rank where CUDA is)."""
    start_worker_server()  # (idempotent) first: the log relay's queues may start the server too
    with (tempfile.TemporaryDirectory(prefix="thrifty-ranks-") as out_dir,
          relayed_worker_logs(_CONTEXT, world_size) as (log_queues, log_level)):
        port = free_loopback_port()
        environment = dict(os.environ)
        procs = [_CONTEXT.Process(target=_rank_main, args=(r, world_size, port, threads_per_rank, process_group,
                                                           out_dir, os.getpid(), environment, device,
                                                           (log_queues[r], log_level), fn, kwargs),
                                  daemon=False)
                 for r in range(world_size)]
        try:
            with _signals_deferred():  # a start cut between the forkserver's fork and its handle here
                for p in procs:        # left a rank neither killed below nor able to start (a traceback)
                    p.start()
            deadline = time.monotonic() + timeout_s
            failed = None
            while any(p.is_alive() for p in procs):
                # a rank that wrote its result and then crashed on the way out (gloo threads at
                # interpreter exit) has finished; only one without a good result stops the others
                failed = next((r for r, p in enumerate(procs)
                               if p.exitcode not in (None, 0) and not _succeeded(out_dir, r)), None)
                if failed is not None or time.monotonic() > deadline:
                    time.sleep(0.5)  # let the failing rank's peers notice and exit on their own
                    break
                time.sleep(0.05)
        except BaseException:  # Ctrl-C or SIGTERM (cli.common.Terminated): the ranks end before the
            for p in procs:     # folder and the log queues they use go (one still starting printed a traceback)
                if p.is_alive():
                    p.kill()
            for p in procs:
                if p.pid is not None:
                    p.join(5)
            raise
        stopped = {r for r, p in enumerate(procs) if p.is_alive()}  # by us, below: not "died"
        for p in procs:
            if p.is_alive():
                p.kill()  # not SIGTERM: a training rank takes that as a preemption notice
            p.join(5)
        results, errors, died, messages = [], [], [], set()
        for rank in range(world_size):
            path = Path(out_dir) / f"rank{rank}.json"
            payload = json.loads(path.read_text()) if path.exists() else None
            if payload and payload["ok"]:
                results.append(payload["result"])
            elif payload:
                errors.append((payload["failed_at"], f"rank {rank} failed: {payload['error']}"))
                messages.add(payload["message"])
            elif (code := procs[rank].exitcode) is not None and code != 0 and rank not in stopped:
                died.append(f"rank {rank} died ({_exit_reason(code)})")
        if died:  # a rank killed from outside: its peers' errors are only lost connections
            raise WorkloadError("; ".join(died))
        if len(errors) == world_size and len(messages) == 1 and None not in messages:
            raise WorkloadError(messages.pop())  # every rank stopped for the same reason
        if errors:  # the earliest failure is the cause; its peers then lose their connections
            raise WorkloadError(min(errors)[1])
        if len(results) < world_size:
            if time.monotonic() > deadline:
                raise WorkloadError(f"{world_size} workers did not finish within {timeout_s:.0f} s")
            raise WorkloadError(f"a worker process died without a result (exit codes "
                                f"{[p.exitcode for p in procs]})")
        return results
