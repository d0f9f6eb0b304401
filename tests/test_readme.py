# SPDX-License-Identifier: MIT
"""The README is short, and what it shows runs: its Python example executes as written, every
command of its table answers --help, its quickstart commands are the Makefile's, its install lines
name real extras and its links lead to files that exist."""

import os
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


def _commands(command, path=()):
    """(words, click command) of every leaf command of the CLI."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


def test_docs_commands_names_every_option_of_every_command():
    """docs/commands.md says it lists every command and option (serve's are in docs/serve.md's table): a
    new user's pass found 36 options of `--help` missing there. Mutation caught: an option added to a
    command and not to its row."""
    import typer.main

    from thrifty.cli.app import app
    rows = [line for line in (ROOT / "docs" / "commands.md").read_text().splitlines() if line.startswith("| `thrifty ")]
    serve = (ROOT / "docs" / "serve.md").read_text()
    missing = {}
    for path, command in _commands(typer.main.get_command(app)):
        head = "| `thrifty " + " ".join(path)
        text = serve if path == ("serve",) else " ".join(r for r in rows if r.startswith((head + " ", head + "`")))
        assert text, f"no row for thrifty {' '.join(path)}"
        names = [[o for o in (*p.opts, *p.secondary_opts) if o.startswith("--")] for p in command.params
                 if p.param_type_name == "option" and not getattr(p, "hidden", False)]
        gone = [n[0] for n in names if n and n[0] != "--help"
                and not any(re.search(re.escape(o) + r"(?![\w-])", text) for o in n)]
        if gone:
            missing[" ".join(path)] = gone
    assert not missing, missing


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


def _quickstart_blocks() -> list[str]:
    quickstart = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```\n(.*?)^```$", quickstart, flags=re.S | re.M)


def test_the_busy_machine_line_is_what_the_profiler_says(monkeypatch):
    """The quickstart's refusal, as the busy check words it for its readings. Mutation caught: the
    message reworded in train.busy without the README following."""
    from thrifty.train.busy import ALLOW_BUSY_ENV, BusyMachineError, Readings, check_quiet
    monkeypatch.delenv(ALLOW_BUSY_ENV, raising=False)  # the suite allows a busy machine
    (line,) = [b.strip() for b in _quickstart_blocks() if b.startswith("error: the machine is busy")]
    load = float(re.search(r"load ([\d.]+) on (\d+) cores", line).group(1))
    with pytest.raises(BusyMachineError) as refused:
        check_quiet(Readings(cores=2, others_load=load, steal_fraction=0.0, run_spread=None), allow_busy=False)
    assert line == f"error: {refused.value}"


def test_the_demo_transcript_has_the_parts_a_plan_prints(profiled_db, tmp_path):
    """What `thrifty plan` prints today (from the suite's stored profile of builtin:digits) has the
    transcript's parts in its order: the job model line, the top table with the transcript's
    columns, the recommendation, the planner's count and the launch command. Mutation caught: a
    column or a section renamed or dropped in cli/plan.py without the README following."""
    (transcript,) = [b for b in _quickstart_blocks() if "candidates evaluated in" in b]
    done = subprocess.run([sys.executable, "-m", "thrifty.cli", "plan", "--workload", "builtin:digits", "--db",
                           str(profiled_db), "--plot", str(tmp_path / "plan.png")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "COLUMNS": "120"})  # a terminal wide enough for the table
    assert done.returncode == 0, done.stderr
    out = done.stdout
    header = next(line for line in transcript.splitlines() if line.strip().startswith("#  VM type"))
    columns = header.split()[1:]
    assert columns == ["VM", "type", "ranks", "batch", "spot", "time", "cost", "interval", "how"]
    for column in ("VM type", "ranks", "batch", "spot", "time", "cost", "interval", "how"):
        assert column in out, column
    parts = ["step-time fit:", "top 10 by cost", "recommended", "candidates evaluated in", "launch (on every node):",
             "torchrun "]
    assert all(part in transcript for part in parts)
    where = [out.find(part) for part in parts]
    assert -1 not in where and where == sorted(where), dict(zip(parts, where, strict=True))
