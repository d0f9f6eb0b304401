"""Small helpers the CLI shares: list parsing, JSON output, one-line errors."""

import json
import math
import sys
from typing import Any

from rich.console import Console

from thrifty.errors import ThriftyError

stdout = Console(highlight=False)
stderr = Console(stderr=True, highlight=False)


def int_list(text: str, what: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]; a clear error for anything else."""
    parts = text.split(",")
    if not text.strip():
        raise ThriftyError(f"{what} is empty")
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise ThriftyError(f"{what} must be comma-separated integers, got {text!r}") from None


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(_clean(data), indent=2) + "\n")


def fmt_duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.3g} ms"
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def fmt_usd(dollars: float) -> str:
    return f"${dollars:.2f}" if dollars >= 0.01 else f"${dollars:.2g}"
