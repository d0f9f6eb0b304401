# SPDX-License-Identifier: MIT
"""The CLI's logging: `thrifty -v` shows thrifty's INFO records (a profile's measurement, a plan's
choice, a checkpoint written, a resume), `-vv` its DEBUG records too, on stderr through rich's
handler; the default shows warnings only. Library users get nothing unless they configure logging
themselves (the records go to the `thrifty` logger tree; Python's last-resort handler prints only
warnings and worse)."""

import logging

from rich.console import Console
from rich.logging import RichHandler

_HANDLER_NAME = "thrifty-cli"


def level_for(verbosity: int) -> int:
    """WARNING by default, INFO for -v, DEBUG for -vv and more."""
    return logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG


def configure_logging(verbosity: int) -> None:
    """Send the `thrifty` loggers' records at `verbosity` to stderr; called once per command, so a
    second call (the tests run many commands in one process) replaces the handler of the first."""
    logger = logging.getLogger("thrifty")
    for handler in [h for h in logger.handlers if h.get_name() == _HANDLER_NAME]:
        logger.removeHandler(handler)
    handler = RichHandler(console=Console(stderr=True, emoji=False), show_time=False, show_path=verbosity >= 2,
                          markup=False, rich_tracebacks=False)
    handler.set_name(_HANDLER_NAME)
    logger.addHandler(handler)
    logger.setLevel(level_for(verbosity))
