# SPDX-License-Identifier: MIT
"""What the serve tests import by name (a module of its own: `from conftest import` finds whichever
folder's conftest was imported first when several test folders run in one pytest)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
MD_TESTS = ROOT / "tests" / "md"
PYTHON = sys.executable
TOKEN = "test-token-0123456789"
SEARCH = ("--target-samples", "2e7", "--noise-scale", "500")


def env(**extra) -> dict:
    paths = [str(ROOT / "src"), str(HERE), str(MD_TESTS), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def run_main(*args) -> str:
    """A real thrifty command in this process (thrifty.cli.app.main); its stdout."""
    import contextlib
    import io

    from thrifty.cli.app import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in args])
    assert code == 0, (args, out.getvalue()[-3000:])
    return out.getvalue()


def copy_db(source: Path, target: Path) -> Path:
    """A consistent copy of a database, its WAL included (sqlite3's online backup)."""
    import sqlite3
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return target
