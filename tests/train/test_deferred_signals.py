# SPDX-License-Identifier: MIT
"""The launcher defers Ctrl-C and SIGTERM while it hands ranks to the forkserver
(train.launcher._signals_deferred), then acts on them as the handlers it met would."""

import os
import signal
import time

import pytest

from thrifty.train.launcher import _signals_deferred


@pytest.fixture()
def sigterm_seen():
    """SIGTERM recorded by a handler of the test's; both handlers as they were afterwards."""
    saved = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    seen: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, saved[0])
        signal.signal(signal.SIGTERM, saved[1])


def _wait_for(seen: list[int]) -> None:
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:  # Python runs the handler between bytecodes
        time.sleep(0.01)


def test_a_sigterm_in_the_block_reaches_its_handler_after_it(sigterm_seen):
    with _signals_deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert sigterm_seen == []  # deferred
    _wait_for(sigterm_seen)
    assert sigterm_seen == [signal.SIGTERM]


def test_a_ctrl_c_between_the_two_restores_leaves_sigterm_acting_as_before(sigterm_seen, monkeypatch):
    """The restored Ctrl-C handler may run as soon as it is back and raise, skipping the SIGTERM
    restore. Mutation caught (tried): the collecting handler collecting after the block too (SIGTERM
    then vanishes into a list nobody reads)."""
    real = signal.signal

    def ctrl_c_at_once(kind, handler):
        out = real(kind, handler)
        if kind == signal.SIGINT:
            raise KeyboardInterrupt  # as the default handler, just restored, would on a Ctrl-C here
        return out

    with pytest.raises(KeyboardInterrupt):
        with _signals_deferred():
            monkeypatch.setattr(signal, "signal", ctrl_c_at_once)
    monkeypatch.undo()
    os.kill(os.getpid(), signal.SIGTERM)
    _wait_for(sigterm_seen)
    assert sigterm_seen == [signal.SIGTERM]
