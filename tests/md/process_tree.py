# SPDX-License-Identifier: MIT
"""A process and every process below it, read from /proc (thrifty.processes): what the Ray tests
of tests/md look for (listening sockets, processes left behind)."""

from thrifty.processes import process_tree


def descendants(root: int) -> set[int]:
    """`root` and every process below it."""
    return process_tree([root])
