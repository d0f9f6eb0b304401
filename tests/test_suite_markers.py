# SPDX-License-Identifier: MIT
"""The markers tests/conftest.py gives by rule (tests/suite_markers.py): what each rule must see, on the
suite's own files, and a slow list that names only tests that exist."""

import ast
from pathlib import Path

import suite_markers as sm

TESTS = Path(__file__).resolve().parent


def _markers(relpath: str, function: str = "test_x", fixtures: tuple[str, ...] = ()) -> set[str]:
    path = TESTS / relpath
    return sm.markers_for(f"tests/{relpath}::{function}", path, function, list(fixtures))


def test_a_module_that_imports_ray_through_thrifty_gets_ray(tmp_path, monkeypatch):
    """`from thrifty.md.campaign.pool import loopback_ray` earns `ray` (loopback_ray imports it when called);
    Mutation caught: not following the imported function's own imports."""
    test_file = tmp_path / "test_sample.py"
    test_file.write_text("from thrifty.md.campaign.pool import loopback_ray\n\ndef test_x():\n    loopback_ray()\n")
    monkeypatch.setattr(sm, "TESTS", tmp_path)
    assert "ray" in sm.markers_for("test_sample.py::test_x", test_file, "test_x", [])


def test_module_level_imports_of_thrifty_are_followed_to_openmm_and_to_the_launcher(tmp_path, monkeypatch):
    """thrifty.md.engines.openmm_engine imports OpenMM when loaded, thrifty.train.trainer the process launcher; a plain
    planner import earns nothing. Mutation caught: reading only the test file's own imports."""
    monkeypatch.setattr(sm, "TESTS", tmp_path)
    cases = {"from thrifty.md.engines.openmm_engine import OpenMMEngine": {"openmm"}, "import thrifty.train.trainer": {"distributed"},
             "from thrifty.plan.optimizer import plan": set(), "import numpy": set()}
    for i, (line, expected) in enumerate(cases.items()):
        test_file = tmp_path / f"test_{i}.py"
        test_file.write_text(f"{line}\n\ndef test_x():\n    pass\n")
        assert sm.markers_for(f"test_{i}.py::test_x", test_file, "test_x", []) == expected, line


def test_an_import_inside_one_test_marks_that_test_only(tmp_path, monkeypatch):
    monkeypatch.setattr(sm, "TESTS", tmp_path)
    test_file = tmp_path / "test_inside.py"
    test_file.write_text("def test_a():\n    import openmm\n\ndef test_b():\n    pass\n")
    assert sm.markers_for("test_inside.py::test_a", test_file, "test_a", []) == {"openmm"}
    assert sm.markers_for("test_inside.py::test_b", test_file, "test_b", []) == set()


def test_a_folders_conftest_counts_and_a_fixture_that_starts_workers_earns_distributed(tmp_path, monkeypatch):
    monkeypatch.setattr(sm, "TESTS", tmp_path)
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "conftest.py").write_text("import openmm\n")
    test_file = tmp_path / "md" / "test_any.py"
    test_file.write_text("def test_x(profiled_db):\n    pass\n")
    assert sm.markers_for("md/test_any.py::test_x", test_file, "test_x", ["profiled_db"]) == {"openmm", "distributed"}


def test_the_suites_own_files_get_the_markers_their_imports_call_for():
    assert "ray" in _markers("md/test_campaign_ray.py")
    assert "distributed" in _markers("train/test_distributed_runs.py")
    assert _markers("plan/test_optimizer.py") == set()
    assert _markers("test_store.py") == set()


def test_the_slow_list_names_only_tests_that_exist():
    """A renamed or deleted test must leave tests/slow_tests.txt too (or the list silently marks
    nothing). Mutation caught: a typo in a listed node id."""
    listed = sm.listed()
    assert listed.get("slow"), "the slow list is empty"
    for marker, ids in listed.items():
        assert marker in {"slow", "distributed", "ray", "openmm"}, marker
        for nodeid in ids:
            file, _, name = nodeid.split("[", 1)[0].partition("::")
            path = TESTS.parent / file
            assert path.is_file(), f"[{marker}] {nodeid}: no file {file}"
            names = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
            assert name.split("::")[-1] in names, f"[{marker}] {nodeid}: no test {name} in {file}"
