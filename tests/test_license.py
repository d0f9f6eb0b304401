# SPDX-License-Identifier: MIT
"""The license is stated where tools look for it: an SPDX expression in pyproject, the LICENSE
file, and an SPDX line at the top of every Python file of the package, its tests and its benchmarks
(REUSE convention). Mutation caught: a new module without the line, or pyproject's license changed
without the files."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPDX = "# SPDX-License-Identifier: MIT"


def test_every_source_file_and_the_project_state_the_same_license():
    license = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert license == "MIT" and (ROOT / "LICENSE").read_text().startswith("MIT License")
    sources = sorted((ROOT / "src" / "thrifty").rglob("*.py"))
    others = sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])
    missing = [str(p.relative_to(ROOT)) for p in sources + others if p.read_text().splitlines()[:1] != [SPDX]]
    assert len(sources) > 100 and len(others) > 100 and missing == []
