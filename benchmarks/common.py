"""Shared by the benchmark scripts: where results go and how they are written."""

import json
import platform
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from thrifty.io import write_text_atomic  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def write_result(name: str, data: dict) -> Path:
    data = {"benchmark": name, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, {platform.python_version()}",
            **data}
    path = RESULTS / f"{name}.json"
    write_text_atomic(path, json.dumps(data, indent=2))
    return path


def save_figure(fig, name: str) -> Path:
    import io
    from thrifty.io import write_bytes_atomic
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    path = RESULTS / f"{name}.png"
    write_bytes_atomic(path, buffer.getvalue())
    return path
