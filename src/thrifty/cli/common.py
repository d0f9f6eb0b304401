"""What every command shares: the common options, the one parser each for lists, durations and
money, human-readable numbers, JSON output, and the runner that turns a ThriftyError into one line
on stderr and exit code 2. Light imports only (typer, rich): `thrifty --help` must start at once."""

import json
import math
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console

from thrifty.errors import ThriftyError
from thrifty.store import DEFAULT_DB
from thrifty.workloads.names import DEFAULT_WORKLOAD

__all__ = ["DEFAULT_DB", "DEFAULT_WORKLOAD", "CatalogOpt", "CloudOpt", "DbOpt", "GpuOpt", "JsonOpt", "RegionOpt",
           "WorkloadOpt", "float_list", "fmt_duration", "fmt_usd", "fmt_usd_range", "int_list", "parse_duration_s",
           "parse_money_usd", "print_json", "run_app", "stderr", "stdout"]

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


CatalogOpt = Annotated[Optional[list[Path]], typer.Option(
    "--catalog", help="Extra catalog CSV (thrifty's or SkyPilot's vms.csv columns); repeatable.")]
CloudOpt = Annotated[Optional[list[str]], typer.Option("--cloud", help="aws, gcp, azure, ...; repeatable.")]
RegionOpt = Annotated[Optional[list[str]], typer.Option("--region", help="Region; repeatable.")]
GpuOpt = Annotated[Optional[bool], typer.Option("--gpu/--cpu", help="Only GPU VMs / only CPU VMs.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines.")]
DbOpt = Annotated[Path, typer.Option("--db", help="SQLite database of profiles, decisions and runs.")]
WorkloadOpt = Annotated[str, typer.Option("--workload", "-w",
                                          help="builtin:NAME or a .py file with make_workload().")]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day)?\s*$", re.IGNORECASE)
_UNIT_S = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400}


def int_list(text: str, what: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; a clear error for anything else."""
    if not text.strip():
        raise ThriftyError(f"{what} is empty")
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise ThriftyError(f"{what} must be comma-separated integers, got {text!r}") from None


def float_list(text: str, what: str) -> tuple[float, ...]:
    """'1,2.5' -> (1.0, 2.5), all positive and finite."""
    try:
        values = tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise ThriftyError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ThriftyError(f"{what} must be positive numbers, got {text!r}")
    return values


def parse_duration_s(text: str, *, what: str, bare_unit: str, allow_zero: bool = False) -> float:
    """'90m', '2.5h', '1d', '3600s' -> seconds; a bare number is in `bare_unit` ('s' for costs and
    start-up, 'h' for deadlines and ages), so `--restart-cost 60` means 60 seconds."""
    match = _DURATION.match(str(text))
    if not match:
        raise ThriftyError(f"cannot read {what} {text!r}: use a number with s, m, h or d, e.g. 12h or 90m")
    value, unit = float(match.group(1)), (match.group(2) or bare_unit).lower()
    seconds = value * _UNIT_S[unit]
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ThriftyError(f"{what} must be positive, got {text!r}")
    return seconds


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


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """JSON on stdout; NaN and infinities become null (JSON has no such numbers)."""
    sys.stdout.write(json.dumps(_clean(data), indent=2) + "\n")


def fmt_duration(seconds: float) -> str:
    """3 significant digits in ms, s, min or h, the unit chosen after rounding (0.9996 s is 1 s)."""
    if not math.isfinite(seconds):
        return "-"
    for limit, scale, unit in ((1, 1e3, "ms"), (120, 1, "s"), (7200, 1 / 60, "min")):
        if float(f"{seconds:.3g}") < limit:
            return f"{seconds * scale:.3g} {unit}"
    return f"{seconds / 3600:.3g} h"


def fmt_usd(dollars: float) -> str:
    """$12.34; small amounts with 2 significant digits in plain decimals ($0.0041, $0.00000041)."""
    if not math.isfinite(dollars):
        return "-"
    sign, dollars = ("-" if dollars < 0 else ""), abs(dollars)
    if round(dollars, 2) >= 0.01 or dollars == 0:
        return f"{sign}${dollars:,.2f}"
    decimals = 1 - math.floor(math.log10(dollars))  # two significant digits
    return f"{sign}${dollars:.{decimals}f}"


def fmt_usd_range(low: float, high: float) -> str:
    """'$0.07-0.16': one dollar sign for both ends; '>= $1.20' when the top is unbounded."""
    if not math.isfinite(high):
        return f">= {fmt_usd(low)}"
    return f"{fmt_usd(low)}-{fmt_usd(high).lstrip('$')}"


def run_app(app: typer.Typer, argv: list[str] | None, prog_name: str = "thrifty") -> int:
    """Run a Typer app; a ThriftyError becomes one line on stderr and exit code 2.

    Usage errors (unknown option, bad type) are reported by Typer itself, also with exit code 2."""
    try:
        app(args=argv, prog_name=prog_name)
    except ThriftyError as exc:
        stderr.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        return 2
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
