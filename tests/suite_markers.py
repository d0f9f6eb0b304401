# SPDX-License-Identifier: MIT
"""The suite's markers, assigned by rule rather than by hand in each file (tests/conftest.py applies them):

- `ray`, `openmm`: the test's module, a helper module beside it or its folder's conftest imports the package,
  directly or through a thrifty module that imports it when it is loaded (the import graph of src/ is read
  from the source, so a new test gets its marker from what it imports);
- `distributed`: the same import graph reaches thrifty's process launcher (`thrifty.train.launcher`), or
  the test uses a fixture that starts worker processes through the CLI (`profiled_db`), or it is named in
  tests/slow_tests.txt's `distributed` section (tests that start them through the CLI themselves);
- `slow`: named in tests/slow_tests.txt (measured over ~5 s in a loaded `make test`).

Imports inside functions of src/ are followed only one step, for the functions a test imports by name
(`from thrifty.md.campaign.pool import loopback_ray` earns `ray`: loopback_ray imports it): the CLI loads each
command's heavy packages inside the command, so following every call would mark each CLI test with
everything. A test function's own imports, and those of the fixtures it uses, mark that test only."""

from __future__ import annotations

import ast
from functools import cache, lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
TESTS = ROOT / "tests"
LIST_FILE = TESTS / "slow_tests.txt"

# marker -> the imports that earn it (a module, or a package: its submodules count too)
IMPORT_MARKERS: dict[str, tuple[str, ...]] = {"ray": ("ray",), "openmm": ("openmm",),
                                              "distributed": ("thrifty.train.launcher",)}
FIXTURE_MARKERS: dict[str, str] = {"profiled_db": "distributed"}


def _resolve(module: str, level: int, package: str) -> str:
    """The absolute name of `from <level dots><module> import ...` written in `package`."""
    if not level:
        return module
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([module] if module else []))


def _imports_in_nodes(nodes, package: str, follow: bool) -> set[str]:
    """The modules the import statements among `nodes` name (for `from a import b`: a, and a.b in case b
    is a module); `follow`: for `from a import f`, also the imports inside a's function or class `f`."""
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(node.module or "", node.level, package)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
            if follow:  # a test calls what it imports: what that function imports when it runs
                found.update(*(_imports_inside(module, alias.name) for alias in node.names))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip" and node.args
              and isinstance(node.args[0], ast.Constant)):  # pytest.importorskip("ray")
            found.add(str(node.args[0].value))
    return found


@cache
def _imports_inside(module: str, name: str) -> frozenset[str]:
    """The imports in the body of the top-level function or class `name` of thrifty module `module`
    (e.g. `run_campaign`'s `import ray`), and in the bodies of the module's functions it calls."""
    found = _src_file(module)
    if not found:
        return frozenset()
    path, package = found
    defs = {n.name: n for n in _parse(path).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    imports: set[str] = set()
    pending, seen = [name], set()
    while pending:
        node = defs.get(pending.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        imports |= _imports_in_nodes(ast.walk(node), package, follow=False)
        pending += [c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
    return frozenset(imports)


def _top_level(tree: ast.Module):
    """Statements run when the module loads: the body, and the bodies of its top-level if/try blocks."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            pending.extend(node.body + node.orelse + getattr(node, "finalbody", [])
                           + [s for h in getattr(node, "handlers", []) for s in h.body])


def _src_file(module: str) -> tuple[Path, str] | None:
    """The file of a thrifty module and the package its relative imports are relative to."""
    if module.split(".")[0] != "thrifty":
        return None
    base = SRC.joinpath(*module.split("."))
    if (base / "__init__.py").is_file():
        return base / "__init__.py", module
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py"), module.rpartition(".")[0]
    return None


@cache
def loads(module: str) -> frozenset[str]:
    """Every module loading `module` loads (itself and its parent packages included), as far as the
    thrifty sources say; third-party packages are leaves."""
    seen: set[str] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            prefix = ".".join(parts[:i])
            if prefix in seen:
                continue
            seen.add(prefix)
            found = _src_file(prefix)
            if found:
                pending.extend(_imports_in_nodes(_top_level(_parse(found[0])), found[1], follow=False))
    return frozenset(seen)


@cache
def modules_of_test_file(path: Path) -> frozenset[str]:
    """What loading a test file loads: its module-level imports (and, for `from a import f`, what f
    imports when it runs), those of the helper modules beside it that it imports, and those of the
    conftest files above it."""
    files = [path] + [d / "conftest.py" for d in path.parents if d.is_relative_to(TESTS)]
    names: set[str] = set()
    for file in (f for f in files if f.is_file()):
        direct = _imports_in_nodes(_top_level(_parse(file)), "", follow=True)
        helpers = [file.parent / f"{m}.py" for m in direct if "." not in m and (file.parent / f"{m}.py").is_file()]
        names |= direct.union(*(_imports_in_nodes(ast.walk(_parse(h)), "", follow=True) for h in helpers))
    return frozenset().union(*(loads(name) for name in names))


@cache
def modules_of_test(path: Path, name: str) -> frozenset[str]:
    """What one test function (or the class of that name) loads beyond its file: its own imports."""
    nodes = [n for n in ast.walk(_parse(path)) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name]
    names = set().union(*(_imports_in_nodes(ast.walk(n), "", follow=True) for n in nodes))
    return frozenset().union(*(loads(m) for m in names))


@cache
def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def import_markers(modules: frozenset[str]) -> set[str]:
    return {marker for marker, targets in IMPORT_MARKERS.items()
            if any(m == t or m.startswith(t + ".") for m in modules for t in targets)}


@lru_cache(maxsize=1)
def listed() -> dict[str, frozenset[str]]:
    """tests/slow_tests.txt: `[marker]` sections of node ids (a test's id without its parameters names
    every parametrisation); `#` starts a comment."""
    sections: dict[str, set[str]] = {}
    current = None
    for raw in LIST_FILE.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], set())
        elif current is None:
            raise ValueError(f"{LIST_FILE}: {raw!r} comes before any [marker] section")
        else:
            current.add(line)
    return {k: frozenset(v) for k, v in sections.items()}


def markers_for(nodeid: str, path: Path, function: str, fixtures: list[str]) -> set[str]:
    """The markers one collected test (`function` in file `path`) gets."""
    files = [path] + [d / "conftest.py" for d in path.parents if d.is_relative_to(TESTS) and (d / "conftest.py").is_file()]
    # the test's own imports and those of the fixtures it uses (defined in its file or a conftest above)
    own = modules_of_test(path, function).union(*(modules_of_test(f, name) for f in files for name in fixtures))
    found = import_markers(modules_of_test_file(path) | own)
    found |= {FIXTURE_MARKERS[f] for f in fixtures if f in FIXTURE_MARKERS}
    bare = nodeid.split("[", 1)[0]
    found |= {marker for marker, ids in listed().items() if nodeid in ids or bare in ids}
    return found
