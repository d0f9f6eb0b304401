# SPDX-License-Identifier: MIT
"""What every command shares: the common options, the one parser each for lists, durations and
money, human-readable numbers, JSON output, and the runner that turns a ThriftyError into one line
on stderr and exit code 2. Light imports only (typer, rich): `thrifty --help` must start at once."""

import importlib
import json
import math
import re
import signal
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from thrifty.errors import ThriftyError
from thrifty.extras import missing_extra
from thrifty.io import json_safe
from thrifty.quantities import fmt_duration, fmt_usd, fmt_usd_bound, fmt_usd_range
from thrifty.store import DEFAULT_DB
from thrifty.workloads.names import DEFAULT_WORKLOAD

__all__ = ["CatalogOpt", "CloudOpt", "CpuOpt", "DEFAULT_DB", "DEFAULT_WORKLOAD", "DbOpt", "GpuOpt", "JsonOpt",
           "RegionOpt", "WorkloadOpt", "error_line", "finite", "float_list", "fmt_duration", "fmt_usd",
           "fmt_usd_bound", "fmt_usd_range", "gpu_filter", "int_list", "non_negative", "number_check", "parse_duration_s",
           "parse_money_usd", "positive", "print_json", "renamed", "run_app", "say_on_interrupt", "stderr", "stdout"]

stdout = Console(highlight=False, emoji=False)  # ":100:" in a message is text, not an emoji
stderr = Console(stderr=True, highlight=False, emoji=False)


CatalogOpt = Annotated[list[Path] | None, typer.Option(
    "--catalog", help="Extra catalog CSV (thrifty's or SkyPilot's vms.csv columns); repeatable.")]
CloudOpt = Annotated[list[str] | None, typer.Option("--cloud", help="aws, gcp, azure, ...; repeatable.")]
RegionOpt = Annotated[list[str] | None, typer.Option("--region", help="Region; repeatable.")]
GpuOpt = Annotated[bool, typer.Option("--gpu", help="Only GPU VMs.")]
CpuOpt = Annotated[bool, typer.Option("--cpu", help="Only CPU VMs.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
HardwareOpt = Annotated[Path | None, typer.Option(help="hardware.csv override")]
NetworkOpt = Annotated[Path | None, typer.Option(help="network.csv override")]
GpusOpt = Annotated[Path | None, typer.Option(help="gpus.csv override (GPU peak rates)")]
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite database of profiles, decisions and runs.")]
WorkloadOpt = Annotated[str, typer.Option("--workload", "-w",
                                          help="builtin:NAME or a .py file with make_workload().")]

# a number as Python writes one (1e1 and .5 too: a new user's --deadline 1e1 was "cannot read"), then a unit
_DURATION = re.compile(r"^\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(ms|s|sec|m|min|h|hr|d|day)?\s*$",
                       re.IGNORECASE)
_BARE_NAMES = {"s": "seconds", "h": "hours"}
_UNIT_S = {"ms": 1e-3, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400}


def default_plot(plot: Path | None, json_out: bool, default: str) -> Path | None:
    """The PNG a command writes: the --plot given, else `default` in the current folder, except
    under --json (a script's call writes no file it did not name)."""
    if plot is not None:
        return plot
    return None if json_out else Path(default)


def gpu_filter(gpu: bool, cpu: bool) -> bool | None:
    """--gpu, --cpu or neither (None: both kinds); both at once is a contradiction, not 'last wins'."""
    if gpu and cpu:
        raise ThriftyError("give --gpu or --cpu, not both")
    return True if gpu else False if cpu else None


def number_check(test, wanted: str):
    """A Typer callback that refuses NaN, infinities and numbers outside `test` (None passes)."""
    def callback(value):
        if value is not None and not (math.isfinite(value) and test(value)):
            raise typer.BadParameter(f"{value} is not {wanted}")
        return value
    return callback


positive = number_check(lambda v: v > 0, "a finite positive number")
non_negative = number_check(lambda v: v >= 0, "a finite number >= 0")
finite = number_check(lambda v: True, "a finite number")


def int_list(text: str, what: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4], all positive; a clear error for anything else."""
    if not text.strip():
        raise ThriftyError(f"{what} is empty")
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise ThriftyError(f"{what} must be comma-separated integers, got {text!r}") from None
    if min(values) < 1:
        raise ThriftyError(f"{what} must be positive integers, got {text!r}")
    return values


def float_list(text: str, what: str) -> tuple[float, ...]:
    """'1,2.5' -> (1.0, 2.5), all positive and finite."""
    try:  # an empty item ('1,,2') is a typo, not a value to drop
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        raise ThriftyError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ThriftyError(f"{what} must be positive numbers, got {text!r}")
    return values


def parse_duration_s(text: str, *, what: str, bare_unit: str, allow_zero: bool = False) -> float:
    """'90m', '2.5h', '1d', '3600s', '100ms' -> seconds (the units the outputs use); a bare number is in `bare_unit` ('s' for costs and
    start-up, 'h' for deadlines and ages), so `--restart-cost 60` means 60 seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ThriftyError(f"cannot read {what} {text!r}: use a number with ms, s, m, h or d, e.g. 12h or 90m "
                           f"(a bare number is {_BARE_NAMES[bare_unit]})")
    value, unit = float(match.group(1)), (match.group(2) or bare_unit).lower()
    seconds = value * _UNIT_S[unit]
    if not math.isfinite(seconds):
        raise ThriftyError(f"{what} must be a finite duration, got {text!r}")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ThriftyError(f"{what} must be {'0 or more' if allow_zero else 'positive'}, got {text!r}")
    return seconds or 0.0  # -0 is 0


def parse_money_usd(text: str, *, what: str = "budget") -> float:
    """'$50', '50', '12.5 USD' -> dollars."""
    cleaned = str(text).strip().removeprefix("$").removesuffix("USD").removesuffix("usd").strip()
    try:
        value = float(cleaned)
    except ValueError:
        raise ThriftyError(f"cannot read {what} {text!r}: give a dollar amount such as 50 or $12.50") from None
    if not math.isfinite(value) or value <= 0:
        raise ThriftyError(f"{what} must be a positive dollar amount, got {text!r}")
    return value


def print_json(data: Any) -> None:
    """JSON on stdout; NaN and infinities become null (JSON has no such numbers)."""
    sys.stdout.write(json.dumps(json_safe(data), indent=2) + "\n")


def _usage_error_types() -> tuple[type[Any], type[Any] | None]:
    """Click's exception classes: vendored inside Typer from 0.2x, the click package before (typed
    Any: which of the two modules provides them is known only at run time)."""
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.ClickException, getattr(module, "NoArgsIsHelpError", None)
    raise ImportError("neither typer's vendored click nor click is installed")


def renamed(old: str, new: str, takes: str) -> Any:
    """A hidden option under an option's old spelling that refuses it in one line naming the new one
    (exit code 2), before any other option is checked. Declare it beside the new option:
        old_model: Annotated[str | None, renamed("--model", "--family", "bathtub, weibull, ...")] = None"""
    def refuse(value: str | None) -> None:
        if value is not None:
            raise ThriftyError(f"{old} is now {new} ({takes})")

    return typer.Option(old, hidden=True, is_eager=True, callback=refuse, show_default=False)


def _os_error_line(exc: OSError) -> str:
    """'cannot use /x/y: Permission denied' for an OSError that escaped the command."""
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot use{where}: {exc.strerror or exc}"


def error_line(message: str) -> None:
    """One line on stderr, however long (never wrapped)."""
    stderr.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def _command_path(app: typer.Typer, argv: list[str] | None, prog_name: str) -> str:
    """'thrifty md sweep': the program and the (sub)command names that lead argv."""
    command: Any = typer.main.get_command(app)  # a click Group, then its subcommands (or None)
    words = [prog_name]
    for word in sys.argv[1:] if argv is None else argv:
        command = getattr(command, "commands", {}).get(word)
        if command is None:
            break
        words.append(word)
    return " ".join(words)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is (stop_on_sigterm), so that what Ctrl-C cleans up (a
    database this command created, its worker processes, their temporary folders) is cleaned up
    for it too; Python's default for SIGTERM ends the process on the spot."""


_terminated: list[int] = []  # the SIGTERMs received (typer turns the exception into a plain exit code 130)


_interrupt_notes: list[str] = []  # what a command says on Ctrl-C in place of "interrupted" (say_on_interrupt)


def say_on_interrupt(note: str) -> None:
    """The one line run_app prints when this command ends on Ctrl-C (where its work stays, how to go on)."""
    _interrupt_notes.append(note)


def sigterm_received() -> bool:
    """Whether stop_on_sigterm's handler ran: what it raised may arrive as a plain KeyboardInterrupt
    (Ray re-raises one of its own from a `get` it interrupts)."""
    return bool(_terminated)


def stop_on_sigterm() -> None:
    """From now on SIGTERM raises Terminated in this process's main thread."""
    def terminated(signum: int, frame: Any) -> None:
        _terminated.append(signum)
        raise Terminated()
    signal.signal(signal.SIGTERM, terminated)


def run_app(app: typer.Typer, argv: list[str] | None, prog_name: str = "thrifty") -> int:
    """Run a Typer app; every failure the user can cause ends as one line on stderr and exit code 2:
    a ThriftyError, a usage error (unknown option, a value that does not parse or is out of range),
    a package of an extra that is not installed, an OSError that escaped a command (a path that
    cannot be read or written), a file that is not UTF-8 text. Bugs still show their traceback."""
    click_error, no_args_help = _usage_error_types()
    _interrupt_notes.clear()  # an earlier command's, in this process (tests run many)
    try:
        result = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except ThriftyError as exc:
        error_line(str(exc))
        return 2
    except ModuleNotFoundError as exc:
        missing = missing_extra(exc, _command_path(app, argv, prog_name))
        if missing is None:
            raise
        error_line(str(missing))
        return 2
    except click_error as exc:
        if no_args_help is not None and isinstance(exc, no_args_help):
            exc.show()  # `thrifty` alone: the help text
            return exc.exit_code
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        error_line(exc.format_message() + hint)
        return 2
    except UnicodeDecodeError as exc:
        error_line(f"a file is not UTF-8 text ({exc.reason} at byte {exc.start})")
        return 2
    except OSError as exc:
        error_line(_os_error_line(exc))
        return 2
    except KeyboardInterrupt:
        result = 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if _terminated:  # after its cleanups ran, as Ctrl-C's do
        error_line("terminated")
        return 128 + signal.SIGTERM
    if result == 130:  # Ctrl-C (typer's plain exit code for it): said in one line, as a SIGTERM is
        error_line(_interrupt_notes[-1] if _interrupt_notes else "interrupted")
    if isinstance(result, int):  # typer.Exit(code) inside a command (130: Ctrl-C)
        return result
    return 0
