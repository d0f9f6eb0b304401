# SPDX-License-Identifier: MIT
"""Render docs/results.md, and the tables marked in the other docs, from benchmarks/results/*.json:
results tables are rendered, never typed.

    python benchmarks/render_results.py            # write docs/results.md and fill the marked tables
    python benchmarks/render_results.py --check    # exit 1 if any of them is not what the JSON renders to

One section per result file, in the order of the registry (benchmarks/run_all.py): what the
benchmark measures, the command that runs it, its plot, its numbers as tables, and the provenance
the file records (date, git revision, uncommitted changes, command line, machine, library
versions; "not recorded" where an older file lacks it). The tables are generic: scalars as
quantity/value rows, lists of records and maps of records as tables; lists too long for a page are
counted and left in the JSON. `*_quick.json` files are end-to-end checks, not results, and are skipped.

The prose pages (docs/search.md, ...) quote tables chosen for their argument: each sits between
`<!-- table: NAME -->` and `<!-- /table -->` and is rendered by benchmarks/doc_tables.py's TABLES[NAME].
"""

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from doc_tables import TABLES  # noqa: E402
from run_all import REGISTRY, by_result  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
DOCS = ROOT / "docs"
DOC = DOCS / "results.md"
MARKED_TABLE = re.compile(r"(<!-- table: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /table -->)", re.DOTALL)
PROVENANCE = ("benchmark", "date", "revision", "dirty", "command", "versions", "machine")
MAX_ROWS = 40       # longer lists of records are counted, not printed
MAX_COLUMNS = 12    # records with more fields than this (and than records) are tabled one field a row
MAX_INLINE = 16     # longer lists of numbers are counted, not printed
NOT_RECORDED = "not recorded"



def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def fmt(value: object) -> str:
    """A JSON value as a table cell."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return str(value)
        if abs(value) >= 10_000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.1f}"
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(fmt(v) for v in value)
    return str(value).replace("|", "\\|").replace("\n", " ")


def _flat(value: dict, prefix: str = "") -> dict[str, object]:
    """A record's scalar leaves (and short lists of scalars) under dotted keys; longer lists and
    lists of records inside a record (per-seed values, series) stay in the JSON."""
    out: dict[str, object] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if _is_scalar(item) or (isinstance(item, list) and len(item) <= MAX_INLINE and all(map(_is_scalar, item))):
            out[name] = item
        elif isinstance(item, dict):
            out.update(_flat(item, f"{name}."))
    return out


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(fmt(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return lines


def _columns(records: list[dict[str, object]]) -> list[str]:
    columns: list[str] = []
    for record in records:
        columns += [k for k in record if k not in columns]
    return columns


def _keyed_table(records: dict[str, dict[str, object]]) -> list[str]:
    """One row per record, or one row per field when there are more fields than fit across a page."""
    columns = _columns(list(records.values()))
    if len(columns) > MAX_COLUMNS and len(columns) > len(records):
        return _table(["", *records], [[c, *[r.get(c) for r in records.values()]] for c in columns])
    return _table(["", *columns], [[key, *[r.get(c) for c in columns]] for key, r in records.items()])


def _similar(a: set[str], b: set[str]) -> bool:
    return len(a & b) >= 0.5 * max(len(a), len(b))


def _walk(path: str, value: object, scalars: list[tuple[str, object]], tables: list[tuple[str, list[str]]]) -> None:
    """Sort a JSON value into quantity/value rows and captioned tables: a list of records is a table,
    and so are two or more sibling records with mostly the same fields; anything else is walked into."""
    def sub(key: object) -> str:
        return f"{path}.{key}" if path else str(key)

    if _is_scalar(value):
        scalars.append((path, value))
    elif isinstance(value, list):
        if all(map(_is_scalar, value)) and len(value) <= MAX_INLINE:
            scalars.append((path, value))
        elif value and all(isinstance(v, dict) for v in value) and len(value) <= MAX_ROWS:
            records = [_flat(v) for v in value]
            columns = _columns(records)
            tables.append((path, _table(columns, [[r.get(c) for c in columns] for r in records])))
        else:
            scalars.append((path, f"{len(value)} entries (in the JSON)"))
    elif isinstance(value, dict):
        groups: list[dict[str, dict[str, object]]] = []
        for key, item in value.items():
            if not isinstance(item, dict) or not (flat := _flat(item)):
                continue
            group = next((g for g in groups if _similar(set(flat), set(next(iter(g.values()))))), None)
            if group is None:
                groups.append({key: flat})
            else:
                group[key] = flat
        tabled = {key for g in groups if len(g) >= 2 for key in g}
        for key, item in value.items():
            if key not in tabled:
                _walk(sub(key), item, scalars, tables)
        for group in groups:
            if len(group) >= 2:
                tables.append((path or "(top level)", _keyed_table(group)))


def provenance(data: dict) -> list[str]:
    """The provenance rows a result file records, "not recorded" for what it lacks."""
    revision = data.get("revision")
    if "dirty" in data:
        dirty = NOT_RECORDED if data["dirty"] is None else data["dirty"]
    elif isinstance(revision, str):  # older files marked a dirty tree with a "+changes" suffix
        dirty = revision.endswith("+changes")
    else:
        dirty = NOT_RECORDED
    if isinstance(revision, str):
        revision = revision.removesuffix("+changes")
    versions = data.get("versions")
    rows = [["date", data.get("date", NOT_RECORDED)],
            ["git revision", revision or NOT_RECORDED],
            ["uncommitted changes in src/ or benchmarks/", dirty],
            ["command line", f"`{data['command']}`" if "command" in data else NOT_RECORDED],
            ["machine", data.get("machine", NOT_RECORDED)],
            ["library versions", ", ".join(f"{k} {v}" for k, v in versions.items()) if versions else NOT_RECORDED]]
    return _table(["provenance", ""], rows)


def section(name: str, data: dict, has_png: bool) -> Iterator[str]:
    """docs/results.md's section for benchmarks/results/NAME.json."""
    bench = by_result(name)
    yield f"## {name}"
    yield ""
    if bench is None:
        yield "Not in the registry (benchmarks/run_all.py): no benchmark is known to write this file."
    else:
        yield f"{bench.measures}"
        yield ""
        yield f"Command: `{bench.command}` (tags: {', '.join(sorted(bench.tags))})."
    yield ""
    if has_png:
        yield f"![{name}](../benchmarks/results/{name}.png)"
        yield ""
    scalars: list[tuple[str, object]] = []
    tables: list[tuple[str, list[str]]] = []
    _walk("", {k: v for k, v in data.items() if k not in PROVENANCE}, scalars, tables)
    if scalars:
        yield from _table(["quantity", "value"], [[f"`{path}`", value] for path, value in scalars])
        yield ""
    for caption, lines in tables:
        yield f"`{caption}`:"
        yield ""
        yield from lines
        yield ""
    yield from provenance(data)
    yield ""


def _order(names: list[str]) -> list[str]:
    registered = [r for b in REGISTRY for r in b.results]
    return sorted(names, key=lambda n: (registered.index(n) if n in registered else len(registered), n))


def render(results: Path = RESULTS) -> str:
    """The whole of docs/results.md for the JSON files under `results`."""
    names = _order([p.stem for p in results.glob("*.json") if not p.stem.endswith("_quick")])
    lines = ["# Benchmark results",
             "",
             "<!-- Rendered by `python benchmarks/render_results.py` from benchmarks/results/*.json: do not edit. "
             "tests/test_results_docs.py fails when this file is stale. -->",
             "",
             "Every number on this page comes from a JSON file a benchmark wrote (`benchmarks/common.py`'s "
             "`write_result`); each section ends with what that file records of the code, command and machine "
             "it came from. Run the benchmarks with `make bench` (all) or `make bench TAGS=quick` "
             "(tags: quick, long, md, gpu; `python benchmarks/run_all.py --list` lists them). What the numbers "
             "mean is in the docs of each part: [training](training.md), [preemption](preemption.md), "
             "[MD](md.md), [search](search.md), [GPU projection](gpu-projection.md), [profiling](profiling.md).",
             "",
             "Results: " + ", ".join(f"[{n}](#{n})" for n in names) + ".",
             ""]
    missing = [r for b in REGISTRY for r in b.results if r not in names]
    if missing:
        lines += ["Registered but not yet run here (no JSON): " + ", ".join(f"`{m}`" for m in missing) + ".", ""]
    for name in names:
        data = json.loads((results / f"{name}.json").read_text())
        lines += list(section(name, data, (results / f"{name}.png").exists()))
    return "\n".join(lines).rstrip("\n") + "\n"


def fill_tables(text: str, results: Path = RESULTS) -> str:
    """`text` (a doc) with every marked table rendered again from its JSON; an unknown table name
    or a missing result file is an error, not an empty table."""
    loaded: dict[str, dict] = {}  # each result read once, however many tables quote it

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in TABLES:
            raise KeyError(f"<!-- table: {name} -->: no such table in benchmarks/doc_tables.py "
                           f"(known: {', '.join(sorted(TABLES))})")
        table = TABLES[name]
        if table.result not in loaded:
            loaded[table.result] = json.loads((results / f"{table.result}.json").read_text())
        return match[1] + "\n".join(table.render(loaded[table.result])) + "\n" + match[4]
    return MARKED_TABLE.sub(fill, text)


def rendered_docs(results: Path = RESULTS) -> dict[Path, str]:
    """Every doc this script writes, with the text the JSON under `results` renders it to."""
    docs = {DOC: render(results)}
    for path in sorted(DOCS.glob("*.md")):
        if path != DOC and MARKED_TABLE.search(text := path.read_text()):
            docs[path] = fill_tables(text, results)
    return docs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a rendered doc is stale; write nothing")
    args = parser.parse_args(argv)
    docs = rendered_docs()
    if args.check:
        stale = [path for path, text in docs.items() if not path.exists() or path.read_text() != text]
        for path in stale:
            print(f"{path.relative_to(ROOT)} is stale: run python benchmarks/render_results.py", file=sys.stderr)
        return 1 if stale else 0
    from thrifty.io import write_text_atomic
    for path, text in docs.items():
        if not path.exists() or path.read_text() != text:
            write_text_atomic(path, text)
            print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
