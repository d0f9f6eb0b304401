"""`python -m thrifty.train ARGS` = `thrifty train ARGS`, the form torchrun launches on every node.

Under torchrun each process is one rank (RANK / WORLD_SIZE from its environment); rank 0 writes
the run directory and prints the summary. This is the command `thrifty plan` prints for its choice.
It runs the train command alone, without assembling the whole CLI app.
"""

import sys

import typer

from thrifty.cli.common import run_app
from thrifty.cli.train import train

if __name__ == "__main__":
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command()(train)
    sys.exit(run_app(single, sys.argv[1:], prog_name="python -m thrifty.train"))
