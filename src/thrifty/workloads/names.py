# SPDX-License-Identifier: MIT
"""Workload names without loading any workload (no torch): the built-ins, and the keys under
which the store keeps a workload's profiles."""

import ast
import functools
import hashlib
from pathlib import Path

from thrifty.errors import WorkloadError

BUILTINS = {"digits": "thrifty.workloads.digits:make_workload",
            "digits-bn": "thrifty.workloads.digits:make_bn_workload",
            "tabular": "thrifty.workloads.tabular:make_workload",
            "resnet18-cifar10": "thrifty.workloads.resnet_builtins:make_cifar10",
            "resnet50-imagenet": "thrifty.workloads.resnet_builtins:make_imagenet"}
DEFAULT_WORKLOAD = "builtin:digits"


def canonical_name(spec: str) -> str:
    """A stable key for the store: built-ins by name, files by absolute path."""
    name = spec.removeprefix("builtin:")
    if name in BUILTINS and not spec.endswith(".py"):
        return f"builtin:{name}"
    if spec.startswith("builtin:"):
        raise WorkloadError(f"unknown built-in workload {name!r}; choose from {', '.join(BUILTINS)}")
    return str(Path(spec).resolve())


def _digest(paths: list[Path], spec: str) -> str:
    """Of the files' names (relative to the first one's folder) and contents: a renamed helper is
    another workload too."""
    sha = hashlib.sha256()
    root = paths[0].parent if paths else Path()
    for path in paths:
        sha.update(str(path.relative_to(root) if path.is_relative_to(root) else path.name).encode() + b"\0")
        try:
            sha.update(path.read_bytes())
        except OSError as exc:  # the file, or a module it imports (named: it had blamed the workload file)
            what = f"workload file {spec}" if path == paths[0] else f"{path}, which workload {spec} imports"
            raise WorkloadError(f"cannot read {what}: {exc.strerror}") from None
    return sha.hexdigest()[:16]


@functools.cache
def _builtins_digest() -> str:
    """The built-ins' code as this process loaded it: hashed once, not on every plan."""
    return _digest(sorted(Path(__file__).parent.glob("*.py")), "builtin")


def workload_key(spec: str) -> str:
    """The store's key for a workload: name or path plus a content hash, so a stored profile is
    used only for the code that made it. Files hash their own source and the Python beside them
    (workload_sources); built-ins hash every module of this package (a thrifty version whose
    workloads changed profiles them again)."""
    name = canonical_name(spec)
    if name.startswith("builtin:"):
        return f"{name}#sha256:{_builtins_digest()}"
    if not Path(name).is_file() or Path(name).suffix != ".py":
        raise WorkloadError(
            f"workload {spec!r} is neither a built-in ({', '.join(BUILTINS)}) nor an existing .py file")
    return f"{name}#sha256:{_digest(workload_files(Path(name)), spec)}"


def workload_sources(path: Path) -> list[Path]:
    """What a workload file imports from where it lies, as `python FILE` finds it (its folder first on
    sys.path while it imports: workloads.registry): the file, and the modules (`name.py`) and packages
    (`name/`, with __init__.py or without) beside it that its import statements name, and theirs, read
    with `ast` (no code runs;
    an import made by other means, importlib.import_module, is not seen). A profile's key hashes them
    (an edited helper module is profiled again) and a plan's SkyPilot task mounts them (plan.launch):
    the other files of the folder (a secrets.py in a home folder) stay where they are."""
    path = Path(path)
    found: dict[str, Path] = {}
    queue, read = [path], set()
    while queue:
        source = queue.pop()
        if source in read:
            continue
        read.add(source)
        for name in sorted(_imported_names(source) - set(found)):
            target = _beside(path.parent, name)
            if target is not None:
                found[name] = target
                queue.extend(_python_files(target))
    return [path, *sorted(found.values())]


def workload_files(path: Path) -> list[Path]:
    """The Python files of workload_sources, packages walked (their .py files, sorted)."""
    return [file for source in workload_sources(path) for file in _python_files(source)]


def _imported_names(source: Path) -> set[str]:
    """The top-level names a file's absolute import statements import (`import a.b`, `from a import b`: a)."""
    try:
        tree = ast.parse(source.read_bytes())
    except (OSError, SyntaxError, ValueError):  # unreadable or not Python: loading it says why
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _beside(folder: Path, name: str) -> Path | None:
    """The package or module `name` in `folder`, in the order Python's path finder takes them: a
    package (with __init__.py), a module, then a namespace package (a folder without one); None if
    none (a folder this user cannot read counts as none)."""
    try:
        package, module = folder / name, folder / f"{name}.py"
        if package.is_dir() and (package / "__init__.py").is_file():
            return package
        if module.is_file():
            return module
        return package if package.is_dir() else None
    except OSError:
        return None


def _python_files(source: Path) -> list[Path]:
    """The file, or a package's .py files (a dangling link among them is no file: left out)."""
    if not source.is_dir():
        return [source]
    try:
        return sorted(path for path in source.rglob("*.py") if path.is_file())
    except OSError:
        return []
