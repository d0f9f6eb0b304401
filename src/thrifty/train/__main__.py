# SPDX-License-Identifier: MIT
"""`python -m thrifty.train ARGS` = `thrifty train ARGS`, the form torchrun launches on every node.

Under torchrun each process is one rank (RANK / WORLD_SIZE from its environment); rank 0 writes
the run directory and prints the summary. This is the command `thrifty plan` prints for its choice.
It runs the train command alone (thrifty.cli.train), without the rest of the CLI: the one place
below cli/ that imports it, as an entry point and not as library code.
"""

import sys

from thrifty.cli.train import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog_name="python -m thrifty.train"))
