# SPDX-License-Identifier: MIT
"""The package and the benchmarks stand on their own: nothing in src/ or benchmarks/ imports from tests/
(a helper a benchmark needs belongs in the package or in benchmarks/)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST_MODULES = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"tests"}


def imports_of_tests(path: Path) -> list[str]:
    """What in `path` reaches into tests/: an import of a module that lives there, or a sys.path entry
    naming the folder."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in TEST_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] in TEST_MODULES:
                found.append(f"from {node.module} import ...")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("insert", "append") and ast.unparse(node.func.value) == "sys.path"
              and '"tests"' in ast.unparse(node).replace("'", '"')):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_of_src_or_benchmarks_imports_from_tests():
    offenders = {str(p.relative_to(ROOT)): imports_of_tests(p)
                 for folder in ("src", "benchmarks") for p in sorted((ROOT / folder).rglob("*.py"))}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, offenders


def test_the_check_sees_both_ways_into_tests(tmp_path):
    """The check cannot pass vacuously: it finds a direct import and the sys.path route."""
    sample = tmp_path / "bench.py"
    sample.write_text("import sys\nsys.path.insert(0, str(ROOT / 'tests' / 'md'))\n"
                      "from standin_profiles import standin_runs\nfrom tests.train import processes\n")
    assert len(imports_of_tests(sample)) == 3
