# SPDX-License-Identifier: MIT
"""Log records of local worker processes, handled by the launcher's loggers.

A rank is forked from the forkserver (train.launcher), not from the launcher, so it does not
inherit the launcher's logging set-up: without this, `thrifty -v train` would show nothing a rank
logs (a checkpoint written, an evaluation). Each rank puts its `thrifty` records, prefixed with
"rank N: ", on a multiprocessing queue of its own (logging.handlers.QueueHandler); a listener
thread in the launcher hands each to the logger of the same name there, which applies the
launcher's levels and handlers (the CLI's, caplog's, a library user's). This is the logging
cookbook's pattern for several processes ("Logging to a single file from multiple processes").
One queue per rank: a queue's writers share a lock, and a rank killed while holding it would
leave its peers unable to exit. For the same reason the launcher waits at most `STOP_WAIT_S` for a
listener to end: the end-of-records marker it sends goes through that lock too, and a rank killed
holding it (or half-way through a record) would otherwise hold the launcher forever.
"""

import contextlib
import logging
import logging.handlers
import threading
import time
from collections.abc import Iterator
from multiprocessing.context import BaseContext
from typing import Any

ROOT = "thrifty"
STOP_WAIT_S = 10.0  # a listener handles what is still queued in far less; only a lost lock takes longer


class _ToLaunchersLoggers(logging.Handler):
    """Hands a record from a rank to the launcher's logger of its name, if that logger is enabled
    for its level (the rank filtered by the launcher's level already; this keeps a later change)."""

    def emit(self, record: logging.LogRecord) -> None:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


class _RankPrefix(logging.Filter):
    def __init__(self, rank: int) -> None:
        super().__init__()
        self.prefix = f"rank {rank}: "

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.prefix + record.getMessage()
        record.args = None
        return True


@contextlib.contextmanager
def relayed_worker_logs(context: BaseContext, ranks: int) -> Iterator[tuple[list[Any], int]]:
    """For the life of a launch (end it after the ranks have ended): (the queue each rank sends its
    records on, the level they log at: the launcher's effective level for `thrifty`)."""
    queues = [context.Queue() for _ in range(ranks)]
    listeners = [logging.handlers.QueueListener(q, _ToLaunchersLoggers()) for q in queues]
    for listener in listeners:
        listener.start()
    try:
        yield queues, logging.getLogger(ROOT).getEffectiveLevel()
    finally:
        _stop(listeners, queues)


def _stop(listeners: list[logging.handlers.QueueListener], queues: list[Any]) -> None:
    """Each listener handles what is still queued, then ends its thread, all at once; one that has
    not within STOP_WAIT_S (a killed rank holds its queue's lock or left half a record in it) is
    left to die with the process (its thread is a daemon) and its queue's feeder is not waited for
    at exit."""
    stoppers = [threading.Thread(target=listener.stop, name="thrifty-log-listener-stop", daemon=True)
                for listener in listeners]
    for stopper in stoppers:
        stopper.start()
    deadline = time.monotonic() + STOP_WAIT_S
    for stopper, queue in zip(stoppers, queues, strict=True):
        stopper.join(max(deadline - time.monotonic(), 0.0))
        if stopper.is_alive():
            queue.cancel_join_thread()
        queue.close()


def send_logs_to_launcher(queue: Any, level: int, rank: int) -> None:
    """In a rank: its `thrifty` records at `level` and above go to the launcher (only there)."""
    logger = logging.getLogger(ROOT)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.handlers.QueueHandler(queue)
    handler.addFilter(_RankPrefix(rank))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
