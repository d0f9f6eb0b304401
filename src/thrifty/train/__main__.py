"""`python -m thrifty.train ARGS` = `thrifty train ARGS`, the form torchrun launches on every node.

Under torchrun each process is one rank (RANK / WORLD_SIZE from its environment); rank 0 writes
the run directory and prints the summary. This is the command `thrifty plan` prints for its choice.
"""

import sys

from thrifty.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
