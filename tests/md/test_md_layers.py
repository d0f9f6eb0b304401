# SPDX-License-Identifier: MIT
"""md/'s layers hold: no import cycle among its modules; the package face, the engines' loop and the
campaign import without OpenMM, torch or Ray; the torch engine and the surrogate import, and the
torch engine runs a job, where OpenMM cannot be imported; one meaning per module name."""

import ast
import sys
from pathlib import Path

MD = Path(__file__).resolve().parents[2] / "src" / "thrifty" / "md"
sys.path.insert(0, str(MD.parents[2] / "tests" / "cli"))
from module_blocker import HEAVY, run_without  # noqa: E402


def _module(path: Path) -> str:
    parts = path.relative_to(MD.parents[1]).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The md modules `path` imports, at module level or inside functions (a lazy import is a
    dependency too); `from package import name` counts as an import of package.name if that is a module."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module
                      for alias in node.names}
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = sorted(MD.rglob("*.py"))
    modules = {_module(p) for p in paths}
    return {_module(p): _imports(p, modules) - {_module(p)} for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle found by a depth-first search (each reported once per back edge)."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for child in sorted(graph.get(node, ())):
            if state.get(child) == "open":
                found.append(path[path.index(child):] + [child])
            elif child not in state:
                visit(child, path + [child])
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_md_has_no_import_cycle():
    graph = import_graph()
    assert graph["thrifty.md.engines.openmm_nanoconfinement"] >= {"thrifty.md.engines.openmm_systems"}  # not vacuous
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]  # the search finds a cycle where there is one
    assert cycles(graph) == []


def test_the_md_face_the_loop_and_the_campaign_import_without_openmm_torch_or_ray():
    done = run_without(HEAVY, """
        import thrifty.md, thrifty.md.engines, thrifty.md.engines.job_loop, thrifty.md.engines.outputs
        import thrifty.md.campaign.runner, thrifty.md.campaign.sweep, thrifty.md.campaign.nanoconfinement_runs
        import thrifty.md.campaign.pool, thrifty.md.campaign.standin, thrifty.md.sampling_settings, thrifty.md.thermo
        from thrifty.md import NanoconfinementModel, SamplingSettings, run_job
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "openmm", "ray")))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_torch_engine_and_the_surrogate_import_and_run_without_openmm(tmp_path):
    # mutation caught: an OpenMM import on the torch engine's path (integrator -> nanoconfinement ->
    # openmm before; replicas building the OpenMM system for its start lattice)
    done = run_without(("openmm",), f"""
        import thrifty.md.torch_physics, thrifty.md.torch_physics.fit, thrifty.md.engines.torch_replicas_engine
        import thrifty.md.surrogate, thrifty.md.surrogate.active_sweep, thrifty.md.surrogate.metrics
        from pathlib import Path
        from thrifty.md import NanoconfinementModel, SamplingSettings, TorchEngine, run_one
        from thrifty.transient.protocol import JobCheckpoints
        engine = TorchEngine([NanoconfinementModel(h_nm=2.0, c_molar=0.8, box_nm=2.4, cutoff_nm=1.0)])
        out = Path({str(tmp_path)!r})
        summary = run_one(engine, SamplingSettings(steps=20, chunk=10, equilibration_steps=0), out / "run",
                          JobCheckpoints(out / "ck", handle_signals=False))
        print(summary["steps"], summary["particles"], "openmm" in sys.modules)
    """, timeout_s=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["20", "10", "False"]


def test_each_md_module_name_says_what_it_is():
    """The names that meant several things (checkpoint, sampler, simulation, job) name one thing each now."""
    names = {p.stem for p in MD.rglob("*.py")}
    assert names.isdisjoint({"checkpoint", "sampler", "simulation", "sim", "job", "batch_job", "systems"})
