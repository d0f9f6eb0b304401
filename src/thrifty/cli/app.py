# SPDX-License-Identifier: MIT
"""The `thrifty` command: one Typer app built from one module per command group. Each command
imports its heavy dependencies (torch, scipy, OpenMM) inside, so `thrifty --help` starts at once."""

import logging
import multiprocessing.util
import os
import sys
from typing import Annotated

import typer

from thrifty.cli import catalog, md_run, md_sweep, model, plan, preempt, profile, run, search, serve, surrogate, train
from thrifty.cli.common import run_app, stop_on_sigterm
from thrifty.cli.logs import configure_logging
from thrifty.transient.protocol import under_runner

app = typer.Typer(help="Train and simulate on the cloud for less.", no_args_is_help=True,
                  add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def options(verbose: Annotated[int, typer.Option(
        "--verbose", "-v", count=True, show_default=False, help="Show what thrifty does on stderr (-v), and its details (-vv).")] = 0,
) -> None:
    """Train and simulate on the cloud for less."""
    configure_logging(verbose)


app.add_typer(catalog.app, name="catalog")
app.command()(profile.profile)
app.add_typer(model.app, name="model")
app.command()(plan.plan)
app.command()(search.search)
app.command()(train.train)
app.add_typer(preempt.app, name="preempt")
app.command(context_settings=run.RUN_CONTEXT)(run.run)
md_run.md_app.command("sweep")(md_sweep.sweep)
md_run.md_app.command("train-surrogate")(surrogate.train_surrogate)
md_run.md_app.command("predict")(surrogate.predict)
app.add_typer(md_run.md_app, name="md")
app.command()(serve.serve)


# the commands for which SIGTERM means stop (as Ctrl-C: what they made is cleaned up), and `md sweep`
# (Ray shut down, the session billed: the same command continues the campaign; Ray's own handler
# had aborted with a crash dump); train too until its run takes SIGTERM as a preemption notice
# (checkpoint, exit 75: train.preemption, which hands a second SIGTERM back to this stop; a SIGTERM in
# its first seconds had ended it silently with 143 and multiprocessing's leak warnings); md run and
# run take it as a notice, serve leaves it to its server
# (search too: `--backend local` must pass the notice to its running launch, not kill it)
STOP_ON_SIGTERM = ("plan", "profile", "model", "catalog", "preempt", "train")


HELP_WIDTH_OFF_TERMINAL = 120  # columns: `--help | cat` had cut --slowdown-sche… at rich's default 80


def widen_help_off_terminal() -> None:
    """Help printed to a pipe or a file (no terminal width to fit) is laid out HELP_WIDTH_OFF_TERMINAL
    wide, so option names and defaults print whole; a terminal's own width, COLUMNS or typer's
    TERMINAL_WIDTH win."""
    import typer.rich_utils
    if typer.rich_utils.MAX_WIDTH is None and "COLUMNS" not in os.environ and not sys.stdout.isatty():
        typer.rich_utils.MAX_WIDTH = HELP_WIDTH_OFF_TERMINAL


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning ThriftyError into one line on stderr and exit code 2.
    As this process's own command (argv None), `thrifty train` ends without the interpreter's
    teardown: its work is written and closed, and tearing down torch takes seconds."""
    words = [word for word in sys.argv[1:] if not word.startswith("-")]  # after -v
    command = words[0] if words else None
    widen_help_off_terminal()
    # under `thrifty run` (THRIFTY_CHECKPOINT_DIR) a SIGTERM to train is the runner's notice even before
    # its run starts: dying of it reads as a preemption and is restarted (143 would read as a failure)
    stops = command in STOP_ON_SIGTERM and not (command == "train" and under_runner())
    if argv is None and (stops or words[:2] == ["md", "sweep"]):
        stop_on_sigterm()  # just before run_app, which turns its exception into one line
    code = run_app(app, argv)
    if argv is None and command == "train":
        # multiprocessing's own part of a normal exit: its finalizers remove the temporary folder
        # that holds the forkserver's socket (/tmp/pymp-*), which os._exit would leave behind
        multiprocessing.util._exit_function()  # type: ignore[attr-defined]
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
