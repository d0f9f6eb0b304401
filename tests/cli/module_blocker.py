# SPDX-License-Identifier: MIT
"""Run Python in a subprocess where some packages cannot be imported, as if they were not installed:
a meta-path finder refuses them with the ModuleNotFoundError a missing package raises.
(sys.modules[name] = None would also break scipy.stats, which probes for torch itself and expects
an ImportError it can catch.)"""

import subprocess
import sys
import textwrap

# the packages of the extras train, md and campaign (thrifty.extras.PACKAGES)
HEAVY = ("torch", "openmm", "ray")


def blocker(modules: tuple[str, ...]) -> str:
    """Code that, run first, makes every module under `modules` unimportable."""
    return textwrap.dedent(f"""
        import sys
        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {tuple(modules)!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}} (blocked in this test)", name=name)
                return None
        sys.meta_path.insert(0, Blocker())
    """)


def run_without(modules: tuple[str, ...], code: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter where `modules` are missing."""
    return subprocess.run([sys.executable, "-c", blocker(modules) + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout_s)


def cli_without(modules: tuple[str, ...], args: list[str]) -> subprocess.CompletedProcess:
    """`thrifty ARGS` in a fresh interpreter where `modules` are missing."""
    return run_without(modules, f"from thrifty.cli.app import main; sys.exit(main({[str(a) for a in args]!r}))")
