# SPDX-License-Identifier: MIT
"""Imported last by the local launcher's forkserver (train.launcher's PRELOAD), and by nothing else:
the server ends without the interpreter's teardown.

The server exits once its last client, the launcher, is gone. A normal exit tears down torch,
torch._dynamo and matplotlib, about 4 s of CPU on a loaded 2-core machine, which the next run's
start-up (a restarted job, the next test) then competes with. The server has nothing to flush or
clean up (its ranks, forked children, end with os._exit), so an atexit handler, registered after
every preloaded module's and hence run first, ends it at once.
"""

import atexit
import os


def _end_now() -> None:
    os._exit(0)


atexit.register(_end_now)
