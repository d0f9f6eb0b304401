import os
from pathlib import Path

import pytest

os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")

FAST_PROFILE = ["--workers", "1,2", "--batch", "16,64", "--steps", "6"]


@pytest.fixture(scope="session")
def profiled_db(tmp_path_factory) -> Path:
    """A database holding one quick real profile (2 worker processes) of builtin:digits."""
    from thrifty.cli.app import main
    db = tmp_path_factory.mktemp("db") / "thrifty.db"
    assert main(["profile", "--db", str(db), *FAST_PROFILE, "--json"]) == 0
    return db


@pytest.fixture()
def run_cli(capsys):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    from thrifty.cli.app import main

    def run(*args: str) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err
    return run
