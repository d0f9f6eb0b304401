# SPDX-License-Identifier: MIT
"""The planning side of thrifty never imports torch, OpenMM or Ray: `thrifty --help`,
`catalog`, `preempt` and `plan` from a stored profile run in a process where importing them fails."""

import json

from module_blocker import HEAVY, cli_without, run_without


def test_core_packages_import_without_torch():
    done = run_without(HEAVY, """
        import thrifty.cli, thrifty.cli.app, thrifty.plan, thrifty.perf, thrifty.transient
        import thrifty.catalog, thrifty.store, thrifty.pipeline, thrifty.plan.launch, thrifty.plan.plot
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "openmm", "ray")))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_blocker_blocks():
    """Without this, a broken blocker would make the other tests pass vacuously."""
    done = run_without(HEAVY, "import torch")
    assert done.returncode != 0 and "blocked in this test" in done.stderr


COMMANDS = [
    ["--help"],
    ["catalog", "list", "--cloud", "aws", "--gpu", "--json"],
    ["catalog", "show", "p4d.24xlarge", "--json"],
    ["preempt", "schedule", "--job-hours", "5", "--json"],
    ["preempt", "reuse", "--job-hours", "1,5", "--json"],
    ["md", "sweep", "--help"],
]


def run_each_without_torch(commands: list[list[str]]):
    """`thrifty ARGS` for each of `commands`, in turn, in one interpreter where HEAVY cannot be
    imported (for each command as for the first); its stderr ends with their exit codes."""
    return run_without(HEAVY, f"""
        from thrifty.cli.app import main
        codes = [main(args) for args in {commands!r}]
        print("exit codes", codes, file=sys.stderr)
    """)


def test_commands_run_without_torch():
    """Mutation caught (tried): `import torch` in preempt's schedule_command (its exit code 2, the
    extra it needs named)."""
    done = run_each_without_torch(COMMANDS)
    assert done.returncode == 0 and f"exit codes {[0] * len(COMMANDS)}" in done.stderr, done.stderr


def test_plan_from_a_stored_profile_runs_without_torch(profiled_db, tmp_path):
    args = ["plan", "--db", str(profiled_db), "--json", "--plot", str(tmp_path / "plan.png"), "--cloud", "aws"]
    done = cli_without(HEAVY, args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["profile_reused"] is True


def test_library_code_never_imports_the_cli():
    """Layering: cli/ imports the library, never the other way; the torchrun entry point
    (train/__main__.py) is the one exception and imports only the train command."""
    import re
    from pathlib import Path

    import thrifty
    package = Path(thrifty.__file__).parent
    offenders = []
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        if relative.startswith("cli/"):
            continue
        for line in path.read_text().splitlines():
            if re.match(r"\s*(from|import)\s+thrifty\.cli\b", line):
                if relative == "train/__main__.py" and line.strip() == "from thrifty.cli.train import main":
                    continue
                offenders.append(f"{relative}: {line.strip()}")
    assert not offenders, offenders


def test_more_commands_run_without_torch(tmp_path):
    """Mutation caught (tried): `import torch` in model_predict (its exit code 2: the extra it needs)."""
    from thrifty.transient.registry import data_file
    samples = tmp_path / "samples.csv"
    samples.write_text("num_nodes,num_workers,local_batch,step_time_s\n" + "".join(
        f"1,{n},{b},{0.002 + 1e-4 * b + 0.003 * (n - 1)}\n" for n in (1, 2) for b in (16, 32, 64, 128)))
    configs = tmp_path / "configs.csv"
    configs.write_text("num_nodes,num_workers,local_batch\n1,2,48\n")
    model = tmp_path / "model.json"
    commands = [["preempt", "fit", str(data_file()), "--family", "weibull", "--json"],
                ["preempt", "show", "gcp-2019", "--plot", str(tmp_path / "model.png"), "--json"],
                ["preempt", "spot", "--job-hours", "2", "--deadline", "4h", "--spot-price", "0.3",
                 "--on-demand-price", "1", "--runs", "500", "--json"],
                ["model", "fit", "--samples", str(samples), "--out", str(model), "--json"],
                ["model", "predict", "--step-time-model", str(model), "--configs", str(configs)]]
    done = run_each_without_torch(commands)
    assert done.returncode == 0, done.stderr
    assert "exit codes [0, 0, 0, 0, 0]" in done.stderr, done.stderr
