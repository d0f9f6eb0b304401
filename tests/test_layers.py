# SPDX-License-Identifier: MIT
"""The layers of thrifty's packages: every module's imports (read with ast, nothing is imported)
point down or sideways, never up, and no two modules import each other, directly or around a loop.

Layers, lowest first; a module may import its own layer and those below:
  0 base       thrifty (the package), errors, io, data, records, store, progress, checkpoint_file, extras,
               processes, folder_lock
  1 catalog    VM types, prices, hardware and GPU specs
  2 perf       step-time, work and noise models
  3 workloads  training jobs (and the work of their steps, counted)
  4 transient  preemption: lifetimes, checkpoint schedules
  5 plan       the planner
  6 train      the trainer
  7 md, search MD campaigns; the local search (it reuses train.lifeline)
  8 pipeline   profile-then-plan, as the CLI runs it
  9 cli, serve the command line and the service
The planning side imports without torch: tests/cli/test_torch_free.py.
"""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS = [
    {"thrifty", "thrifty.errors", "thrifty.io", "thrifty.data", "thrifty.records", "thrifty.store",
     "thrifty.progress", "thrifty.checkpoint_file", "thrifty.extras", "thrifty.processes", "thrifty.folder_lock"},
    {"thrifty.catalog"},
    {"thrifty.perf"},
    {"thrifty.workloads"},
    {"thrifty.transient"},
    {"thrifty.plan"},
    {"thrifty.train"},
    {"thrifty.md", "thrifty.search"},
    {"thrifty.pipeline"},
    {"thrifty.cli", "thrifty.serve"},
]

# Entry points run a command and may import the CLI from any layer: module -> why it is one.
ENTRY_POINTS = {
    "thrifty.train.__main__": "`python -m thrifty.train`, the command torchrun launches on every node",
}

def modules(src: Path = SRC) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package's __init__) for every module under src/thrifty."""
    found = {}
    for path in sorted((src / "thrifty").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _owner(name: str, known: dict) -> str | None:
    """The longest prefix of `name` that is a module (`thrifty.x.f` names a function in thrifty.x)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(source: str, module: str, is_package: bool, known: dict) -> set[str]:
    """The thrifty modules `source` imports, anywhere in it (a lazy import inside a function counts)."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {_owner(alias.name, known) for alias in node.names if alias.name.split(".")[0] == "thrifty"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..y import z
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "thrifty":
                continue
            for alias in node.names:  # `from thrifty.workloads import bert` imports the module bert
                name = f"{target}.{alias.name}"
                found.add(name if name in known else _owner(target, known))
    found.discard(None)
    found.discard(module)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    known = modules(src)
    return {name: imports(path.read_text(), name, is_package, known) for name, (path, is_package) in known.items()}


def layer_of(module: str) -> int:
    """The index in LAYERS of the longest package prefix of `module` that a layer names."""
    best, depth = None, -1
    for index, packages in enumerate(LAYERS):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and package.count(".") > depth:
                best, depth = index, package.count(".")
    if best is None:
        raise KeyError(f"{module} is in no layer: add its package to LAYERS")
    return best


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(importer, imported) pairs where the imported module sits in a higher layer."""
    return {(module, target) for module, targets in graph.items() if module not in ENTRY_POINTS
            for target in targets if layer_of(target) > layer_of(module)}


def cycle_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Every edge inside a strongly connected component of more than one module (Tarjan 1972)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return {(a, b) for component in components for a in component for b in graph[a] if b in component}


GRAPH = import_graph()


def test_every_module_is_in_a_layer():
    for module in GRAPH:
        layer_of(module)


def test_no_import_cycle_among_thriftys_modules():
    cycles = cycle_edges(GRAPH)
    assert not cycles, "import cycle(s): " + ", ".join(f"{a} -> {b}" for a, b in sorted(cycles))


def test_no_module_imports_a_higher_layer():
    upward = upward_imports(GRAPH)
    assert not upward, "upward import(s): " + ", ".join(
        f"{a} (layer {layer_of(a)}) -> {b} (layer {layer_of(b)})" for a, b in sorted(upward))


def test_entry_points_exist_and_reach_up_only_to_the_cli():
    for module in ENTRY_POINTS:
        assert module in GRAPH, f"entry point {module} is gone: remove it from ENTRY_POINTS"
        upward = {t for t in GRAPH[module] if layer_of(t) > layer_of(module)}
        assert upward and all(layer_of(t) == layer_of("thrifty.cli") for t in upward), (module, upward)


def test_the_layer_checks_catch_what_they_are_for():
    """The checks themselves: a planted upward import, a planted cycle, and a relative import."""
    planted = {"thrifty.perf.work": {"thrifty.cli.common"}, "thrifty.cli.common": set(),
               "thrifty.plan.a": {"thrifty.plan.b"}, "thrifty.plan.b": {"thrifty.plan.a"}}
    assert upward_imports(planted) == {("thrifty.perf.work", "thrifty.cli.common")}
    assert cycle_edges(planted) == {("thrifty.plan.a", "thrifty.plan.b"), ("thrifty.plan.b", "thrifty.plan.a")}
    known = modules()
    found = imports("from ..cli import common\nfrom . import work\n", "thrifty.perf.roofline", False, known)
    assert found == {"thrifty.cli.common", "thrifty.perf.work"}


@pytest.mark.parametrize("module, target", [
    ("thrifty.workloads.published", "thrifty.train.workcount"),
    ("thrifty.catalog.hardware", "thrifty.perf.roofline"),
])
def test_the_upward_imports_issue_23_named_are_gone(module, target):
    assert target not in GRAPH[module]
