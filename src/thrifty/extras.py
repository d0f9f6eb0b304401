# SPDX-License-Identifier: MIT
"""The optional extras (pyproject's [project.optional-dependencies]) and the packages they bring.

The core install plans (numpy, scipy, typer, rich, matplotlib). `thrifty[train]` adds torch,
`thrifty[md]` OpenMM and torch (the torch
engine, the surrogate), `thrifty[campaign]` Ray, `thrifty[all]` all three. A command that meets a
missing one says which extra to install, in one line (`missing_extra`, used by the CLI's runner).
"""

import importlib.util

from thrifty.errors import ThriftyError

__all__ = ["PACKAGES", "MissingExtra", "extra_for", "missing_extra", "require"]

# top-level module -> the name users know the package by
PACKAGES = {"torch": "PyTorch", "openmm": "OpenMM", "ray": "Ray"}


class MissingExtra(ThriftyError):
    """A command needs a package that its extra would have installed."""


def extra_for(module: str, command: str) -> str:
    """The extra that brings `module` to `command`: torch comes with [md] to the md commands and
    with [train] to the others; OpenMM with [md], Ray with [campaign]."""
    if module == "torch":
        return "md" if "md" in command.split() else "train"
    return {"openmm": "md", "ray": "campaign"}[module]


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder refused it, or a failed import left None behind
        return False


def missing_extra(exc: ModuleNotFoundError, command: str) -> MissingExtra | None:
    """The one-line error for `command` when `exc` is about a missing extra's package itself (not
    one of its submodules, not a module of the user's own code), else None."""
    module = (exc.name or "").split(".")[0]
    if module not in PACKAGES or _installed(module):
        return None
    extra = extra_for(module, command)
    also = " (a campaign's runs also need an engine: 'thrifty[md]')" if extra == "campaign" else ""
    return MissingExtra(f"{command} needs {PACKAGES[module]}: pip install 'thrifty[{extra}]'{also}")


def require(*modules: str) -> None:
    """Fail now, as the import would later, when a package a command will need is not installed
    (for a command that would otherwise meet it only in another process or after writing)."""
    for module in modules:
        if not _installed(module):
            raise ModuleNotFoundError(f"No module named {module!r}", name=module)
