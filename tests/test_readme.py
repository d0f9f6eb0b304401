"""The README is short, and what it shows runs: its Python example executes as written, every
command of its table answers --help, its quickstart commands are the Makefile's, its install lines
name real extras and its links lead to files that exist."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.S | re.M)


def _table_commands() -> list[str]:
    section = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)


def test_the_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300


def test_the_readme_keeps_no_run_history():
    for phrase in ("today", "the run before", "re-run", "previous run", "this stop"):
        assert phrase not in README.lower(), phrase


def test_the_python_example_runs_as_written(profiled_db, tmp_path):
    """The one Python block, run as a script in a folder whose thrifty.db holds a stored profile of
    builtin:digits (the suite's quick profile), so the example reuses it and plans at once."""
    (example,) = _blocks("python")
    shutil.copy(profiled_db, tmp_path / "thrifty.db")
    script = tmp_path / "example.py"
    script.write_text(example)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "'cloud': 'gcp'" in done.stdout and "'predicted_cost_usd'" in done.stdout, done.stdout  # the plan


@pytest.mark.parametrize("command", _table_commands())
def test_every_command_in_the_table_answers_help(command, run_cli):
    words = command.split()
    if words[0] == "thrifty":
        code, out, _ = run_cli(*words[1:], "--help")
        assert code == 0 and "Usage" in out, command
    else:
        assert words[:2] == ["python", "-m"], command
        done = subprocess.run([sys.executable, *words[1:], "--help"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "usage" in done.stdout.lower(), (command, done.stderr)


def test_the_command_table_covers_every_command_group(run_cli):
    listed = {tuple(c.split()[1:2]) for c in _table_commands() if c.startswith("thrifty ")}
    code, out, _ = run_cli("--help")
    assert code == 0
    groups = set(re.findall(r"^│ (\w[\w-]*) ", out, flags=re.M))
    assert groups and groups <= {g for (g,) in listed}, groups - {g for (g,) in listed}


def test_the_quickstart_commands_are_the_makefiles():
    makefile = (ROOT / "Makefile").read_text()
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    for target in re.findall(r"^make (\w+)", quickstart, flags=re.M):
        assert re.search(rf"^{target}:", makefile, flags=re.M), target
    demo = re.search(r"^demo:.*\n\t\$\(BIN\)/(thrifty .*)$", makefile, flags=re.M).group(1)
    assert " ".join(f"`{demo}`".split()) in " ".join(quickstart.split())
    assert "pytest -q -n 2 --dist worksteal tests" in re.search(r"^test:.*\n\t(.*)$", makefile, flags=re.M).group(1)


def test_the_install_lines_name_real_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = re.findall(r"pip install 'thrifty\[(\w+)\]'", README)
    assert named and set(named) <= set(extras)


def test_the_links_lead_to_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links
    for link in links:
        assert (ROOT / link).exists(), link
