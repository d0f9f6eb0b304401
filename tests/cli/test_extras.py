# SPDX-License-Identifier: MIT
"""Extras: the core install is the planning packages; a command that needs a package of a missing
extra says which extra to install, in one line on stderr with exit code 2, before it writes
anything; any other missing module keeps its own error."""

import json
import re
import tomllib
from pathlib import Path

import pytest
import typer
from module_blocker import HEAVY, cli_without

from thrifty.cli.common import run_app
from thrifty.extras import PACKAGES, extra_for, missing_extra

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"
DISTRIBUTION = {"torch": "torch", "openmm": "openmm", "ray": "ray"}
CAMPAIGN_NOTE = " (a campaign's runs also need an engine: 'thrifty[md]')"


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\s]", requirement, maxsplit=1)[0].lower() for requirement in requirements}


def _project() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def test_the_core_install_is_the_planning_packages():
    """Mutation caught (tried): torch, OpenMM or Ray back in [project] dependencies;
    [all] without one of the three extras."""
    project = _project()
    assert _names(project["dependencies"]) == {"numpy", "scipy", "typer", "rich", "matplotlib"}
    extras = project["optional-dependencies"]
    assert _names(extras["train"]) == {"torch"}
    assert _names(extras["md"]) == {"openmm", "torch"}
    assert _names(extras["campaign"]) == {"ray"}
    assert extras["all"] == ["thrifty[train,md,campaign,serve]"]


@pytest.mark.parametrize("command", ["thrifty train", "thrifty plan", "thrifty md run", "thrifty md sweep",
                                     "python -m thrifty.train"])
def test_the_extra_a_message_names_brings_the_package(command):
    """Mutation caught (tried): extra_for naming an extra that lacks the package (OpenMM -> [train])."""
    extras = _project()["optional-dependencies"]
    for module in PACKAGES:
        assert DISTRIBUTION[module] in _names(extras[extra_for(module, command)]), (module, command)


def test_torch_comes_with_md_to_the_md_commands():
    """Mutation caught (tried): extra_for always answering [train] for torch."""
    assert extra_for("torch", "thrifty md train-surrogate") == "md"
    assert extra_for("torch", "thrifty train") == "train"


@pytest.fixture()
def places(tmp_path) -> dict[str, Path]:
    space = tmp_path / "space.toml"
    space.write_text("[h_nm]\nvalues = [2.0, 2.5]\n[c_molar]\nvalues = [0.3, 0.5]\n")
    return {"space": space, "db": tmp_path / "t.db", "out": tmp_path / "out", "png": tmp_path / "plan.png"}


CASES = [  # (packages missing, thrifty ARGS, the message, what must not exist afterwards)
    (HEAVY, ["train", "--db", "{db}", "--run-dir", "{out}"], "thrifty train needs PyTorch: pip install 'thrifty[train]'",
     ["db", "out"]),
    (HEAVY, ["plan", "--db", "{db}", "--plot", "{png}"], "thrifty plan needs PyTorch: pip install 'thrifty[train]'",
     ["png"]),
    (HEAVY, ["md", "run", "--steps", "10", "--out", "{out}"], "thrifty md run needs OpenMM: pip install 'thrifty[md]'",
     ["out"]),
    (("torch",), ["md", "run", "--engine", "torch", "--system", "nanoconfinement", "--steps", "10", "--out", "{out}"],
     "thrifty md run needs PyTorch: pip install 'thrifty[md]'", ["out"]),
    (HEAVY, ["md", "sweep", "--space", "{space}", "--budget-runs", "1", "--db", "{db}"],
     "thrifty md sweep needs Ray: pip install 'thrifty[campaign]'" + CAMPAIGN_NOTE, ["db"]),
    # a simulation that cannot load: without the early check for the surrogate's torch, that error comes first
    (("torch",), ["md", "sweep", "--space", "{space}", "--budget-runs", "6", "--initial-runs", "5", "--db", "{db}",
                  "--sampler", "active", "--simulation", "thrifty_no_such_module:run"],
     "thrifty md sweep needs PyTorch: pip install 'thrifty[md]'", ["db"]),
    (HEAVY, ["md", "train-surrogate", "--runs", "{out}", "--out", "{out}"],
     "thrifty md train-surrogate needs PyTorch: pip install 'thrifty[md]'", ["out"]),
]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("missing, args, message, untouched", CASES, ids=[
    "train", "plan-profiles", "md-run-openmm", "md-run-torch", "md-sweep-ray", "md-sweep-active",
    "md-train-surrogate"])
def test_a_command_names_the_extra_it_misses(places, missing, args, message, untouched):
    """Mutations caught (each tried): run_app without its ModuleNotFoundError clause (a traceback, exit 1);
    the md sweep's require() removed (the store is written before Ray is imported; the active sweep
    fails on its simulation instead); md run's require() removed (the output folders are made before
    the torch engine is imported); the spinner shown off a terminal (an empty line before the error)."""
    done = cli_without(missing, [a.format(**places) for a in args])
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: {message}"] and done.stdout == ""
    assert not [name for name in untouched if places[name].exists()]


@pytest.mark.timeout(200)
def test_md_run_on_the_torch_engine_runs_where_openmm_is_not_installed(tmp_path):
    """The torch engine's command, not only its modules, is OpenMM-free; and the OpenMM engine
    still names its extra there; without --system the torch engine runs the one system it has.
    Mutations caught: md run importing md.engines.openmm_systems for its choices (or its platform
    check) whatever the engine; --system defaulting to ions with --engine torch (refused, exit 2)."""
    out = tmp_path / "torch"
    done = cli_without(("openmm",), ["md", "run", "--engine", "torch", "--h", "2",
                                     "--c", "0.8", "--box-nm", "2.4", "--cutoff-nm", "1",
                                     "--steps", "20", "--chunk", "10", "--equilibrate", "10", "--out", str(out),
                                     "--json"])
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["steps"] == 20 and summary["system"] == "nanoconfinement" and (out / "profiles.csv").exists()
    refused = cli_without(("openmm",), ["md", "run", "--steps", "10", "--out", str(tmp_path / "openmm")])
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        "error: thrifty md run needs OpenMM: pip install 'thrifty[md]'"]
    assert not (tmp_path / "openmm").exists()


def test_only_a_missing_extra_package_itself_is_translated():
    """Mutations caught (tried): translating a missing submodule of an installed package (a broken
    install is not a missing extra); translating a module that no extra brings."""
    assert missing_extra(ModuleNotFoundError("gone", name="torch.no_such_part"), "thrifty train") is None
    assert missing_extra(ModuleNotFoundError("gone", name="thrifty_no_such_module"), "thrifty train") is None


def test_any_other_missing_module_keeps_its_own_error():
    """A module of the user's own code that is missing is reported as itself (here: the traceback a
    bug shows). Mutation caught (tried): run_app translating every ModuleNotFoundError."""
    app = typer.Typer()

    @app.command()
    def needs_a_missing_module() -> None:
        import thrifty_no_such_module  # noqa: F401

    with pytest.raises(ModuleNotFoundError, match="thrifty_no_such_module"):
        run_app(app, [])
