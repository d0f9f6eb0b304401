# SPDX-License-Identifier: MIT
"""thrifty without the [serve] extra: the planning side imports as before, and `thrifty serve`
says in one line what to install."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from module_blocker import cli_without, run_without

SERVE_PACKAGES = ("fastapi", "uvicorn", "plotly")


def test_thrifty_serve_without_its_packages_is_one_line_and_exit_2(tmp_path):
    """Mutation caught: the serve packages imported at the top of cli/serve.py (an ImportError
    traceback instead of the line)."""
    done = cli_without(SERVE_PACKAGES, ["serve", "--db", tmp_path / "any.db"])
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "pip install 'thrifty[serve]'" in lines[0]


def test_the_cli_and_the_planner_import_without_the_serve_packages():
    """Mutation caught: cli/app.py importing thrifty.serve (which imports FastAPI) at start."""
    done = run_without(SERVE_PACKAGES, """
        import thrifty.cli.app, thrifty.plan, thrifty.store
        assert not any(name.split('.')[0] in ('fastapi', 'uvicorn', 'plotly', 'starlette') for name in sys.modules)
        print('ok')
    """)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
